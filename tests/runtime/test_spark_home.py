"""SeaTide's Spark home: PySpark's installation without its Python zips, so the Python
processes Spark starts import the installed (compiled) package."""

from __future__ import annotations

import os

from pyspark.sql.functions import udf

from seatide.runtime import spark_home


def test_the_home_links_every_entry_of_pyspark_but_its_python_zips(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    home = spark_home.prepared()
    source = spark_home.pyspark_home()
    assert sorted(os.listdir(home)) == sorted(set(os.listdir(source)) - {"python"})
    assert os.path.realpath(os.path.join(home, "jars")) == os.path.join(source, "jars")
    assert not os.path.exists(os.path.join(home, "python", "lib", "pyspark.zip"))
    assert spark_home.prepared() == home                        # made once, then reused
    os.unlink(os.path.join(home, "bin"))                       # a missing link is put back
    assert spark_home.prepared() == home and os.path.isdir(os.path.join(home, "bin"))
    assert [n for n in os.listdir(tmp_path / "seatide") if n != os.path.basename(home)] == [], \
        "a staging directory was left behind"


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
