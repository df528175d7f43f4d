"""The child that ``class_archive.build`` runs (``python -m seatide.runtime.archive_dump``): a
JVM started as a driver's is, loading what a driver loads, then exiting so it dumps the archive.

Apart from ``class_archive.py`` because it starts a session and runs the warm-up pipeline, and
the session needs the archive's options: in one module the archive, the session and the warm
driver imported each other. Nothing imports this module; it is only run.
"""

from __future__ import annotations

import sys

from seatide.runtime.class_archive import QUIET
from seatide.runtime.session import build_session
from seatide.runtime.warm_driver import _first_pipeline


def _dump(target: str) -> None:
    """In the child: load what a driver loads, then exit the JVM so it writes ``target``."""
    from pyspark import SparkContext

    # After SeaTide's own options (session_conf puts them first): the archive is dumped
    # by a JVM started as every driver's is.
    options = f"-XX:ArchiveClassesAtExit={target} {QUIET}"
    spark = build_session("seatide-jvm-archive", {"spark.driver.extraJavaOptions": options})
    _first_pipeline(spark)
    spark.range(1000).selectExpr("id % 7 as k", "id").groupBy("k").count().collect()
    jvm = SparkContext._gateway.proc
    spark.stop()
    # The JVM exits when its stdin closes, and writes the archive on the way out: wait for it.
    jvm.stdin.close()
    jvm.wait(timeout=600)


if __name__ == "__main__":
    _dump(sys.argv[1])
