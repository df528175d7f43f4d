"""The Spark home SeaTide's drivers run from: PySpark's own, without its Python zip files.

The pip distribution of PySpark holds its Python code twice: as the installed package,
compiled to bytecode when it was installed, and as ``python/lib/pyspark.zip`` (and py4j's
zip) inside the Spark home. Spark puts those zips first on the path of every Python process
it starts: workers, the data-source planners' daemons, a streaming source's runner. Python
keeps no bytecode for a zip, so each of them compiled PySpark from source as it started:
1.4 s of CPU against 0.35 s from the installed package (measured on this 2-core machine),
and a small checkpointed job starts 7-8 of them.

SeaTide's Spark home is the same installation through symbolic links, without ``python/``:
the zips Spark names do not exist, Python passes over them, and the processes import the
installed package (the same PySpark the driver runs). It lives in SeaTide's cache directory,
one per installation, made once, atomically (a directory renamed into place).
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


def cache_dir() -> str:
    """SeaTide's cache directory (this home, the class archive): $XDG_CACHE_HOME/seatide."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "seatide")


def pyspark_home() -> str:
    """The installed PySpark's own Spark home (its package directory)."""
    import pyspark

    return os.path.dirname(os.path.realpath(pyspark.__file__))


def _wanted(source: str) -> list[str]:
    return sorted(name for name in os.listdir(source) if name not in _LEFT_OUT)


def prepared() -> str:
    """The directory to use as SPARK_HOME, made on first use.

    Its name is a key over the installation's path and entries, so an upgrade that changes
    them gets a new directory and never touches one a running driver may be using. A link
    that went missing is put back; nothing there is ever replaced."""
    source = pyspark_home()
    wanted = _wanted(source)
    key = hashlib.sha256("\0".join([source, *wanted]).encode()).hexdigest()[:12]
    home = os.path.join(cache_dir(), f"spark-home-{key}")
    if not os.path.isdir(home):
        os.makedirs(cache_dir(), exist_ok=True)
        staging = tempfile.mkdtemp(prefix=f"spark-home-{key}.", dir=cache_dir())
        os.chmod(staging, 0o755)
        for entry in wanted:
            os.symlink(os.path.join(source, entry), os.path.join(staging, entry))
        try:
            os.rename(staging, home)
        except OSError:          # another process made it first: a rename onto it fails
            shutil.rmtree(staging, ignore_errors=True)
    for entry in wanted:
        link = os.path.join(home, entry)
        if not os.path.lexists(link):
            try:
                os.symlink(os.path.join(source, entry), link)
            except FileExistsError:
                pass
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
