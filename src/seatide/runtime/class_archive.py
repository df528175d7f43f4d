"""A class data sharing archive for the driver's JVM: Spark's classes, already parsed.

A driver's JVM spends most of its start-up loading and verifying the classes of Spark,
Hadoop and Arrow, the same ones in every driver. Java 17 can dump the classes one run
loaded into an archive (``-XX:ArchiveClassesAtExit``) that later JVMs map instead
(``-XX:SharedArchiveFile``). Measured on a 2-core machine: a session's start and first
query cost its JVM 17 s of CPU without the archive and 8 s with it.

The archive fits one Java, one Spark installation and one class path: its name is a key
over all three, so an upgrade simply leaves the old archive unused (and the next build
removes it; other installations' archives are left alone). A JVM that cannot use the archive (a job that changes the driver's class
path, say) starts as it would without it: the JVM checks the archive itself and falls back
silently. ``seatide jvm-archive`` builds it (``scripts/setup`` does, and the worker's
systemd unit before it starts); until then drivers start without it.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys

from seatide.runtime.class_path import JDBC_JARS

log = logging.getLogger(__name__)

# SEATIDE_JVM_ARCHIVE=0 turns the archive off; SEATIDE_JVM_ARCHIVE_DIR moves it.
ENABLED_ENV = "SEATIDE_JVM_ARCHIVE"
DIR_ENV = "SEATIDE_JVM_ARCHIVE_DIR"
FORMAT = 2          # bump when what the archive is built from changes (2: SeaTide's Spark home)
# Quiet: a JVM that cannot map the archive (another class path) says so on stdout, and the
# dump warns about every class it skips (signed jars, old class files): neither is news.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def enabled() -> bool:
    return os.environ.get(ENABLED_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def archive_dir() -> str:
    if os.environ.get(DIR_ENV):
        return os.environ[DIR_ENV]
    from seatide.runtime import spark_home

    return os.path.join(spark_home.cache_dir(), "jvm")


def _java() -> str:
    """The java PySpark's launcher runs: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(found) if found else ""


def _stamp(path: str) -> list:
    try:
        st = os.stat(path)
    except OSError:
        return [path, None]
    return [path, st.st_size, st.st_mtime_ns]


def _spark_jars() -> str:
    return os.path.realpath(_class_path_jars())


def _class_path_jars() -> str:
    """Spark's jars as the driver's class path names them: through the Spark home its
    sessions run from (an archive records those paths)."""
    from seatide.runtime import spark_home

    return os.path.join(spark_home.effective(), "jars")


def _installation() -> str:
    """Names the Spark installation: several (two virtual environments, say) share the
    cache directory, each with archives of its own, since an archive records the paths of
    the jars it was built from."""
    return hashlib.sha256(_spark_jars().encode()).hexdigest()[:8]


def key() -> str:
    """What the archive depends on: the JVM, Spark's jars and our extra class path."""
    jars = _spark_jars()
    try:
        # Times too: the JVM maps an archive only over the very jar files it was built from,
        # and a virtual environment made again at the same path has the same names and sizes.
        spark_jars = sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in os.scandir(jars))
    except OSError:
        spark_jars = []
    parts = {"format": FORMAT, "java": _stamp(_java()), "spark": [jars, spark_jars, _class_path_jars()],
             "class_path": [_stamp(jar) for jar in JDBC_JARS]}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


def archive_path() -> str:
    return os.path.join(archive_dir(), f"spark-driver-{_installation()}-{key()}.jsa")


def java_options() -> str:
    """The driver JVM's options that map the archive, or "" when there is none to map."""
    if not enabled():
        return ""
    try:
        path = archive_path()
    except Exception as exc:      # no Spark home, no java: the session's start will say so
        log.debug("no JVM class archive: %s", exc)
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET}" if os.path.isfile(path) else ""


def build(force: bool = False, timeout: float = 900.0) -> str:
    """Build the archive unless it exists (or ``force``); return its path.

    A child process starts a session and runs a job-shaped pipeline, so the archive holds
    what drivers load; its JVM writes the archive as it exits, to a temporary name that is
    renamed into place only then (a reader never maps half an archive). One build at a
    time per directory (a lock file), so workers starting together build it once.
    """
    path = archive_path()
    os.makedirs(archive_dir(), exist_ok=True)
    with open(os.path.join(archive_dir(), "build.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isfile(path) and not force:
            return path
        # Under the lock no other build runs: a partial archive here is a killed build's.
        for leftover in glob.glob(os.path.join(archive_dir(), f"spark-driver-{_installation()}-*.jsa.partial-*")):
            _remove(leftover)
        partial = f"{path}.partial-{os.getpid()}"
        env = {**os.environ, ENABLED_ENV: "0"}      # the dumping JVM must not map an old archive
        done = subprocess.run([sys.executable, "-m", "seatide.runtime.archive_dump", partial], env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=timeout)
        if done.returncode != 0 or not os.path.isfile(partial):
            _remove(partial)
            tail = done.stdout.decode(errors="replace")[-2000:]
            raise RuntimeError(f"the JVM class archive was not written (exit {done.returncode}):\n{tail}")
        os.replace(partial, path)
        # This installation's archives for another Java, Spark or class path: never mapped again.
        for stale in glob.glob(os.path.join(archive_dir(), f"spark-driver-{_installation()}-*.jsa")):
            if stale != path:
                _remove(stale)
        return path


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass
