"""The driver JVM's class data sharing archive: built by setup, mapped by every session that
fits it, ignored (silently) by one that does not."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from seatide.runtime import class_archive
from seatide.runtime.session import session_conf

SETUP_HINT = "the archive is missing: scripts/setup builds it (.venv/bin/seatide jvm-archive)"


def _mapped(pid: int) -> set[str]:
    with open(f"/proc/{pid}/maps") as handle:
        return {line.split()[-1] for line in handle if line.rstrip().endswith(".jsa")}


def test_the_shared_session_maps_the_archive_setup_built(spark):
    path = class_archive.archive_path()
    assert os.path.isfile(path), SETUP_HINT
    jvm = spark.sparkContext._gateway.proc.pid
    assert path in _mapped(jvm)
    assert f"-XX:SharedArchiveFile={path}" in session_conf({})["spark.driver.extraJavaOptions"]


def test_a_session_on_another_class_path_starts_without_it_and_says_nothing(tmp_path):
    """The archive fits one class path; a job that changes the driver's falls back to loading
    classes as usual, without a warning in its output."""
    path = class_archive.archive_path()
    assert os.path.isfile(path), SETUP_HINT
    script = (
        "from seatide.runtime.session import build_session\n"
        "spark = build_session('other-class-path', {'spark.master': 'local[1]',\n"
        f"    'spark.driver.extraClassPath': {str(tmp_path)!r}}})\n"
        "print('rows', spark.range(5).count())\n"
        "maps = open(f'/proc/{spark.sparkContext._gateway.proc.pid}/maps').read()\n"
        f"print('mapped', {path!r} in maps)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rows 5" in done.stdout and "mapped False" in done.stdout, done.stdout
    assert "cds" not in done.stdout + done.stderr, done.stdout + done.stderr


def test_turned_off_no_session_is_told_to_map_it(monkeypatch):
    monkeypatch.setenv(class_archive.ENABLED_ENV, "0")
    assert class_archive.java_options() == ""
    assert "SharedArchiveFile" not in session_conf({})["spark.driver.extraJavaOptions"]


def test_no_archive_built_yet_means_no_option(monkeypatch, tmp_path):
    monkeypatch.setenv(class_archive.DIR_ENV, str(tmp_path))
    assert class_archive.java_options() == ""


def test_the_name_changes_with_the_class_path_so_a_stale_archive_is_never_mapped(monkeypatch, tmp_path):
    jar = tmp_path / "driver.jar"
    jar.write_bytes(b"one")
    monkeypatch.setattr(class_archive, "JDBC_JARS", (str(jar),))
    before = class_archive.key()
    jar.write_bytes(b"a longer jar")
    assert class_archive.key() != before


def test_spark_jars_installed_again_at_the_same_path_get_a_new_archive(monkeypatch, tmp_path):
    """A fresh clone's virtual environment at a path an earlier one had (CI's checkout, say)
    holds the same jars under the same names and sizes, written anew: the JVM refuses an archive
    whose jars' times differ, silently, so the name must change with them."""
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core.jar").write_bytes(b"classes")
    monkeypatch.setattr(class_archive, "_spark_jars", lambda: str(jars))
    monkeypatch.setattr(class_archive, "_class_path_jars", lambda: str(jars))
    before = class_archive.key()
    stamp = os.stat(jars / "spark-core.jar")
    os.utime(jars / "spark-core.jar", ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1_000_000_000))
    assert class_archive.key() != before


def test_an_existing_archive_is_not_built_again(monkeypatch, tmp_path):
    monkeypatch.setenv(class_archive.DIR_ENV, str(tmp_path))
    existing = class_archive.archive_path()
    with open(existing, "wb") as handle:
        handle.write(b"archive")

    def no_child(*args, **kwargs):
        raise AssertionError("built again")

    monkeypatch.setattr(subprocess, "run", no_child)
    assert class_archive.build() == existing


def test_a_failed_build_says_why_and_leaves_nothing_behind(monkeypatch, tmp_path):
    monkeypatch.setenv(class_archive.DIR_ENV, str(tmp_path))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))    # the child's JVM cannot start
    with pytest.raises(RuntimeError, match="was not written"):
        class_archive.build(timeout=240)
    assert [name for name in os.listdir(tmp_path) if name.endswith(".jsa") or ".partial" in name] == []


def test_a_build_removes_this_installations_stale_archives_and_leaves_others(monkeypatch, tmp_path):
    monkeypatch.setenv(class_archive.DIR_ENV, str(tmp_path))
    mine = class_archive._installation()
    stale = tmp_path / f"spark-driver-{mine}-0000.jsa"
    killed = tmp_path / f"spark-driver-{mine}-0000.jsa.partial-12345"
    other = tmp_path / "spark-driver-ffffffff-0000.jsa"        # another virtual environment's
    for path in (stale, killed, other):
        path.write_bytes(b"x")

    def dump(argv, **kwargs):       # the child's JVM writes the archive it is given
        with open(argv[-1], "wb") as handle:
            handle.write(b"archive")
        return subprocess.CompletedProcess(argv, 0, b"")

    monkeypatch.setattr(subprocess, "run", dump)
    built = class_archive.build()
    assert sorted(os.listdir(tmp_path)) == sorted(["build.lock", os.path.basename(built), other.name])
