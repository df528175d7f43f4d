"""SeaTide's Spark home: PySpark's installation without its Python zips, so the Python
processes Spark starts import the installed (compiled) package."""

from __future__ import annotations

import os
import shutil

from pyspark.sql.functions import udf

from seatide.runtime import spark_home


def test_the_home_holds_every_entry_of_pyspark_but_its_python_zips(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    home = spark_home.prepared()
    source = spark_home.pyspark_home()
    assert sorted(os.listdir(home)) == sorted(set(os.listdir(source)) - {"python", "__pycache__"})
    jar = next(n for n in os.listdir(os.path.join(source, "jars")) if n.startswith("spark-core"))
    # a file of its own (not a link into the installation, which a fresh clone's venv replaces), same bytes and time
    held, installed = os.stat(os.path.join(home, "jars", jar)), os.stat(os.path.join(source, "jars", jar))
    assert not os.path.islink(os.path.join(home, "jars")) and held.st_size == installed.st_size
    assert held.st_mtime_ns == installed.st_mtime_ns
    assert not os.path.exists(os.path.join(home, "python", "lib", "pyspark.zip"))
    assert spark_home.prepared() == home                        # made once, then reused
    assert [n for n in os.listdir(tmp_path / "seatide") if n != os.path.basename(home)] == [], \
        "a staging directory was left behind"


def _installation(root, jar_bytes: bytes):
    """A PySpark-shaped installation at ``root``: what a Spark home is made from."""
    (root / "jars").mkdir(parents=True)
    (root / "jars" / "spark-core_2.13-9.9.9.jar").write_bytes(jar_bytes)
    (root / "bin").mkdir()
    (root / "bin" / "spark-class").write_text("#!/bin/sh\n")
    (root / "__pycache__").mkdir()
    (root / "python").mkdir()
    (root / "python" / "pyspark.zip").write_bytes(b"zip")
    return str(root)


def test_a_second_installation_of_the_same_pyspark_gets_the_same_home_and_another_pyspark_its_own(tmp_path, monkeypatch):
    # A fresh clone's CI run makes a new virtual environment at a new path: the same home, so the
    # driver class archive built over its jars is mapped, not built again.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = spark_home.prepared(_installation(tmp_path / "venv1", b"jar"))
    (tmp_path / "venv2").mkdir()
    second_source = _installation(tmp_path / "venv2" / "pyspark", b"jar")
    (tmp_path / "venv2" / "pyspark" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"more bytecode")
    assert spark_home.prepared(second_source) == first
    shutil.rmtree(tmp_path / "venv1")                          # the first clone is gone: its home holds on
    assert (tmp_path / "cache" / "seatide" / os.path.basename(first) / "jars" / "spark-core_2.13-9.9.9.jar").read_bytes() == b"jar"
    assert not os.path.exists(os.path.join(first, "python")) and not os.path.exists(os.path.join(first, "__pycache__"))
    upgraded = spark_home.prepared(_installation(tmp_path / "venv3", b"another jar"))
    assert upgraded != first and os.path.isdir(first)          # a running driver keeps its files


def test_a_spark_home_set_by_the_user_is_left_alone(monkeypatch):
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    spark_home.use()
    assert os.environ["SPARK_HOME"] == "/opt/spark"


def test_python_workers_import_the_installed_pyspark_not_the_zip(spark):
    where = udf(lambda: __import__("pyspark").__file__)
    path = spark.range(1).select(where().alias("p")).first().p
    assert ".zip" not in path and path.startswith(spark_home.pyspark_home()), path


def test_an_unwritable_cache_falls_back_to_pysparks_own_home(tmp_path, monkeypatch):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")                     # XDG_CACHE_HOME/seatide cannot be made under a file
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    monkeypatch.delenv("SPARK_HOME", raising=False)
    spark_home.use()
    assert os.environ["SPARK_HOME"] == spark_home.pyspark_home()
