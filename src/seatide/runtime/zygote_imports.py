"""What the Python zygote (runtime/python_zygote.py) imports for the processes it forks, and when.

A forked child imports, after its fork, whatever its work needs and the zygote has not imported.
Traced with an audit hook on ``import`` in each child (2-core machine, shared session and drivers):

* a streaming source's runner, and each worker of the planning daemons (``create_data_source``,
  ``plan_data_source_read``), unpickles a SeaTide data source: its module and the plugin, config
  and connector modules it uses (0.1 s), then the database client it connects with (psycopg,
  0.1-0.2 s). That was nearly all of a runner's CPU (0.13 of 0.15 s);
* each worker of the ``pyspark.worker`` daemon imports the same, then pandas for its Arrow
  batches (0.25-0.35 s): 0.45-0.95 s per worker, and a driver's daemon forks one per core, again
  after a worker is lost.

So the zygote imports them itself, once, before the first fork that needs them: a zygote whose
Spark never needs Python, or never reads through ``pyspark.worker``, pays nothing for them.
"""

from __future__ import annotations

import gc
import os
import sys
import logging

log = logging.getLogger(__name__)

# Imported as the zygote starts, after the modules Spark starts (python_zygote.FORKED_MODULES):
# those a daemon's workers import after their fork, whatever the job.
AT_START = ("pyspark.worker", "pyspark.sql.worker.create_data_source",
            "pyspark.sql.worker.plan_data_source_read", "pyspark.sql.worker.lookup_data_sources",
            "pyspark.sql.worker.commit_data_source_write", "pyspark.sql.worker.write_into_data_source",
            "pyspark.sql.worker.data_source_pushdown_filters")
# Imported before the first fork, what a child of a SeaTide job imports: the modules of SeaTide's
# Python data sources (tests/runtime/test_zygote_imports.py checks that each is here) with what
# they import, the clients they connect with, and the codec its connection back to the JVM uses.
# Not pyiceberg (0.7 s with its SQL catalog) nor pypaimon: only the workers of the few Iceberg
# and Paimon jobs import them, and every zygote would pay.
BEFORE_ANY_FORK = ("encodings.idna",
                   "seatide.connectors.fake.split_stream", "seatide.connectors.fake.table_splits",
                   "seatide.connectors.jdbc.split_reader", "seatide.connectors.jdbc.table_plans",
                   "seatide.connectors.jdbc.split_measure", "seatide.connectors.jdbc.read_types",
                   "seatide.connectors.http.poll_stream", "seatide.connectors.redis.scan_stream",
                   "seatide.connectors.iceberg.snapshot_stream", "seatide.connectors.paimon.snapshot_stream",
                   "seatide.connectors.mysql_cdc.stream", "seatide.connectors.postgres_cdc.stream",
                   "psycopg", "pymysql", "pymysql.cursors")
# Imported before the first fork of a daemon of ``pyspark.worker``: what its workers import for
# Arrow batches.
BEFORE_WORKER_DAEMON = ("pandas", "pyarrow.compute", "pyarrow.pandas_compat", "pyarrow.vendored.version")
WORKER_DAEMON = ("pyspark.daemon", "pyspark.worker")

# Read when the modules above are imported: a forked child sees the zygote's values, so a
# request whose values differ is refused (zygote_fit.settings_fit). PySpark's, SeaTide's
# failpoints, psycopg's implementation and wait function, pandas' modes, pymysql's default user
# (tests/runtime/test_zygote_imports.py checks SeaTide's modules read no other).
IMPORT_TIME_ENV = ("PYSPARK_ENABLE_NAMEDTUPLE_PATCH", "SPARK_TESTING", "SEATIDE_FAILPOINTS",
                   "PSYCOPG_IMPL", "PSYCOPG_WAIT_FUNC",
                   "PANDAS_DATA_MANAGER", "PANDAS_COPY_ON_WRITE", "PANDAS_FUTURE_INFER_STRING",
                   # pymysql's default user (getpass.getuser(), at its import)
                   "LOGNAME", "USER", "LNAME", "USERNAME")

_imported: set[str] = set()


def import_all(modules: tuple[str, ...], required: bool = False) -> None:
    """Import ``modules``, each once. Unless ``required``, a module that is missing or fails is
    the child's to import (and fail on) as a fresh process would, and the zygote goes on serving.

    Without the garbage collector: the imports make ~100,000 objects that live as long as the
    process, and the collections they set off (some 260, one of them full) freed under 900 and
    took 8% of the imports' CPU. Then frozen, as before a fork (python_zygote.serve), so no later
    collection walks them either."""
    wanted = [module for module in modules if module not in _imported]
    if not wanted:
        return
    collecting = gc.isenabled()
    gc.disable()
    try:
        for module in wanted:
            _imported.add(module)
            try:
                __import__(module)
            except Exception as exc:       # noqa: BLE001 (an import may raise anything)
                if required:
                    raise
                log.debug("python zygote: not preloading %s: %s", module, exc)
    finally:
        # One collection, then freeze: what the imports left unreachable (dead classes, cycles) is
        # freed as a fresh process would free it, not frozen into every child for good.
        gc.collect()
        gc.freeze()
        if collecting:
            gc.enable()
        _reseed_numpy_in_children()


_reseeding = False


def _reseed_numpy_in_children() -> None:
    """numpy seeds its global generator once, when ``numpy.random`` is imported, and never again at
    a fork (Python's ``random`` does): imported here, every child and every worker its daemon forks
    would draw the same numbers, where fresh processes would each seed their own. Registered once;
    a fork copies the registration, so a daemon's forks reseed too."""
    global _reseeding
    if not _reseeding and "numpy.random" in sys.modules:
        _reseeding = True
        os.register_at_fork(after_in_child=lambda: sys.modules["numpy.random"].seed())


def before_fork(module: str, args: list[str]) -> None:
    """Import what the child about to be forked to run ``module`` with ``args`` will import."""
    import_all(BEFORE_ANY_FORK)
    if (module, *args[:1]) == WORKER_DAEMON:
        import_all(BEFORE_WORKER_DAEMON)
