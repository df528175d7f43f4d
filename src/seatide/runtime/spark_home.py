"""The Spark home SeaTide's drivers run from: PySpark's own, without its Python zip files.

The pip distribution of PySpark holds its Python code twice: as the installed package,
compiled to bytecode when it was installed, and as ``python/lib/pyspark.zip`` (and py4j's
zip) inside the Spark home. Spark puts those zips first on the path of every Python process
it starts: workers, the data-source planners' daemons, a streaming source's runner. Python
keeps no bytecode for a zip, so each of them compiled PySpark from source as it started:
1.4 s of CPU against 0.35 s from the installed package (measured on this 2-core machine),
and a small checkpointed job starts 7-8 of them.

SeaTide's Spark home is the same installation without ``python/``: the zips Spark names do not
exist, Python passes over them, and the processes import the installed package (the same PySpark
the driver runs). It lives in SeaTide's cache directory, made once, atomically (a directory renamed
into place), as files of its own: hard links to the installation's (copies across file systems).
Its name is a key over what it holds (each file's name and size; Spark's jars are named by version;
bytecode left out, as Python writes more of it as it goes), not over
where the installation is: a fresh clone's new virtual environment with the same PySpark gets the
same home, and so the same driver class archive (class_archive.py, which names the jars by path
and time), instead of building one again (41 s of two cores in each fresh-clone CI run).
A SPARK_HOME set by the user is left alone.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile

log = logging.getLogger(__name__)

# Not linked: the Python code Spark would put before the installed package.
_LEFT_OUT = {"python"}
_BYTECODE = "__pycache__"


def cache_dir() -> str:
    """SeaTide's cache directory (this home, the class archive): $XDG_CACHE_HOME/seatide."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "seatide")


def pyspark_home() -> str:
    """The installed PySpark's own Spark home (its package directory)."""
    import pyspark

    return os.path.dirname(os.path.realpath(pyspark.__file__))


def _wanted(source: str) -> list[str]:
    return sorted(name for name in os.listdir(source) if name not in _LEFT_OUT and name != _BYTECODE)


def _contents(source: str) -> list[str]:
    """What the home's name is a key over: its entries, and Spark's jars by name and size (what the JVM
    runs; jars are named by version). A listing, not a walk: every session's start asks (0.2 s walked)."""
    jars = os.path.join(source, "jars")
    held = sorted(f"jars/{e.name}:{e.stat().st_size}" for e in os.scandir(jars)) if os.path.isdir(jars) else []
    return _wanted(source) + held


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:         # another file system, or links not allowed: a copy keeps the time too
        shutil.copy2(src, dst)


def prepared(source: str | None = None) -> str:
    """The directory to use as SPARK_HOME, made on first use from ``source`` (the installed
    PySpark's home). Nothing there is ever replaced: an upgrade has other contents, so another
    name, and a running driver keeps the files it uses."""
    source = source or pyspark_home()
    key = hashlib.sha256("\0".join(_contents(source)).encode()).hexdigest()[:12]
    home = os.path.join(cache_dir(), f"spark-home-{key}")
    if not os.path.isdir(home):
        os.makedirs(cache_dir(), exist_ok=True)
        staging = tempfile.mkdtemp(prefix=f"spark-home-{key}.", dir=cache_dir())
        try:
            os.chmod(staging, 0o755)
            for entry in _wanted(source):
                src, dst = os.path.join(source, entry), os.path.join(staging, entry)
                if os.path.isdir(src):
                    shutil.copytree(src, dst, symlinks=True, copy_function=_link_or_copy,
                                    ignore=shutil.ignore_patterns(_BYTECODE))
                else:
                    _link_or_copy(src, dst)
            os.rename(staging, home)
        except OSError:          # another process made it first (a rename onto it fails), or no room
            shutil.rmtree(staging, ignore_errors=True)
            if not os.path.isdir(home):
                raise
    return home


def effective() -> str:
    """The Spark home this process's sessions run from: SPARK_HOME when set, else ours, else
    (a cache directory that cannot be written) PySpark's own: slower workers, same results."""
    if os.environ.get("SPARK_HOME"):
        return os.environ["SPARK_HOME"]
    try:
        return prepared()
    except OSError as exc:
        log.warning("SeaTide's Spark home could not be made in %s (%s): Spark's Python workers "
                    "start from PySpark's own, about 1 s of CPU slower each", cache_dir(), exc)
        return pyspark_home()


def use() -> None:
    """Point this process (and the JVM and Python workers it starts) at SeaTide's Spark home,
    unless SPARK_HOME is set already."""
    os.environ["SPARK_HOME"] = effective()
