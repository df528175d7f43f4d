"""Shared fixtures: one SparkSession for the whole run (it costs ~7 s to start)."""

from __future__ import annotations

import gc
import secrets
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import create_engine, text

from seatide.testing.driver_processes import mark_owner
from seatide.testing.pg_tablespace import in_memory

# The suite runs in several pytest processes (pytest-xdist) that reuse job ids: each counts
# only the driver processes it started itself.
mark_owner()

# Private database servers with logical decoding / binlog on, started once per run when a
# test asks for them (change data capture). At the end, a check that nothing the run started
# outlives it (seatide/testing/leftovers.py); throughout, that only tests marked `cluster`
# start SeaTide's own processes (seatide/testing/tiers.py: the fast tier, -m "not cluster").
# Before xdist's workers collect, the test modules' assertion rewriting, once for all of them
# (seatide/testing/rewrite_cache.py).
pytest_plugins = ["tests.connectors.cdc_servers", "tests.connectors.cdc_mysql_server", "tests.shared_cluster",
                  "seatide.testing.leftovers",
                  "seatide.testing.tiers",
                  "seatide.testing.rewrite_cache"]


def pytest_collection_finish(session):
    """The pytest process's garbage collector: 15 % of its CPU in the fast tier (44 of 285 CPU-s
    over two processes, 80 % of it in full collections that walked 0.3-0.8 million objects, 0.3 s
    each, up to 1.5 s at once). What collection made (modules, test items: 340,000 objects) lives
    to the end, so it is frozen out of every later walk; and a full collection waits for five
    times as many younger ones. Same tests, same hour: 23 CPU-s of collecting, the longest 0.9 s."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 50)


@pytest.fixture(scope="session")
def spark():
    from seatide.runtime.session import build_session

    session = build_session("seatide-tests", {"spark.master": "local[2]"})
    yield session
    stop_session(session)


def stop_session(session) -> None:
    """Stop the session, its JVM (which exits when its stdin ends) and this process's Python
    zygote, and wait for them: the run's end checks that nothing it started is left."""
    from pyspark import SparkContext

    from seatide.runtime import python_zygote

    jvm = SparkContext._gateway.proc
    session.stop()
    jvm.stdin.close()
    jvm.wait(timeout=120)
    python_zygote.stop()


@pytest.fixture
def quick_catalog_load(monkeypatch):
    """Loading a job asks each Postgres-CDC source's server for its tables, up to
    ``_LOAD_TIMEOUT_S`` (5 s) each: against a server that takes connections and never answers,
    every submit, check and resume of a three-source job waited 15 s of it. 1 s where that load
    is not the test's subject (the same path runs, the same error is met, sooner)."""
    from seatide.connectors.postgres_cdc import source

    monkeypatch.setattr(source, "_LOAD_TIMEOUT_S", 1)


@pytest.fixture
def data_dir(tmp_path):
    path = tmp_path / "seatide"
    path.mkdir()
    return str(path)


PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@pytest.fixture(scope="session")
def _pg_databases():
    """The run's administrative connection, and a thread that drops each test's database after
    it. A drop (WITH FORCE: it ends the sessions a test left) took 0.3 s on average in the fast
    tier, 54 s of its test time over 160 tests: the next test need not wait for it. Every drop is
    done before the run ends."""
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")

    def drop(name: str) -> None:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))

    dropping = []
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="drop-test-database") as drops:
        yield admin, lambda name: dropping.append(drops.submit(drop, name))
    admin.dispose()
    # A drop that failed is said, as it was when the test dropped its own database.
    failed = [str(done.exception()) for done in dropping if done.exception() is not None]
    assert not failed, f"test databases not dropped: {failed}"


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/state.db"
        return
    admin, drop_later = request.getfixturevalue("_pg_databases")
    name = f"seatide_{secrets.token_hex(4)}"
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}{in_memory()}"))
        # A commit here waits for no WAL flush (1.6 ms each on this disk, more beside other
        # fsyncs): the same transactions, locks and isolation; only a crash of this shared
        # server, which no test makes, could lose the last moment's commits.
        conn.execute(text(f"ALTER DATABASE {name} SET synchronous_commit = off"))
    yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    drop_later(name)
