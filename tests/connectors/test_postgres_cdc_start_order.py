"""A Postgres-CDC source that waits at its first offsets on the slot.name's advisory lock (another job making
the same slot, behind open write transactions) for longer than the start waits for a query's sources
(``pipeline_start.SOURCES_UP_WITHIN_S``) is still refused before a pipeline whose sink would remove data
(DROP_DATA) starts: the start waits for the queries still opening before it starts such a pipeline (outside
review of the slot ownership, finding 3). A real server with logical replication, a real advisory lock."""

from __future__ import annotations

import threading
import time

import pytest
from psycopg import sql

from seatide.connectors.postgres_cdc import ownership
from tests.connectors.test_postgres_cdc import shop  # noqa: F401  (a fixture)
from tests.e2e.harness import FAKE_FIELDS, InProcessCluster, dropped_and_guarded

pytestmark = pytest.mark.spark

SLOT = "start_order_locked"
OTHER_JOB = "other-job.0123456789ab"       # the run key of the job making the same slot.name
WAITED_PAST_S = 5.0       # the source's lock wait, well past the start's (shortened) wait for its first offsets


def _job(url: str, db: str, dropped) -> str:
    return f"""
env {{ job.mode = STREAMING, checkpoint.interval = 1000, parallelism = 1, job.retry.times = 0,
       job.retry.interval.seconds = 0 }}
source {{
  Postgres-CDC {{ plugin_output = "cdc", base-url = "{url}", username = "postgres", password = "",
    table-names = ["{db}.public.items"], slot.name = "{SLOT}", startup.mode = "latest" }}
  FakeSource {{ plugin_output = "s2", row.num = 3, sequence.field = "id", {FAKE_FIELDS} }}
}}
sink {{
  Console {{ plugin_input = "cdc" }}
  LocalFile {{ plugin_input = "s2", path = "{dropped}", file_format_type = "json", data_save_mode = "DROP_DATA" }}
}}
"""


def _lock_wait_s(conn) -> float | None:
    """Seconds the source's session has waited for a slot name's advisory lock in this database (None: none waits)."""
    row = conn.execute("SELECT max(extract(epoch FROM now() - a.query_start)) FROM pg_locks l JOIN pg_stat_activity a "
                       "USING (pid) WHERE l.locktype = 'advisory' AND NOT l.granted AND l.database = "
                       "(SELECT oid FROM pg_database WHERE datname = current_database())").fetchone()
    return None if row[0] is None else float(row[0])


def test_a_source_waiting_past_the_start_bound_on_the_slot_name_lock_is_refused_before_data_is_removed(
        spark, shop, tmp_path, monkeypatch, private_postgres):  # noqa: F811
    from seatide.runtime import pipeline_start
    from seatide.runtime.pipeline_run import PipelineRun

    conn, url, db = shop
    monkeypatch.setattr(pipeline_start, "SOURCES_UP_WITHIN_S", 1.0)    # 60 s in production: shortened, not removed
    real, started = PipelineRun._start_query, []

    def start_query(self, sinks):
        started.append([s.name for s in self.pipeline.sinks])
        real(self, sinks)

    monkeypatch.setattr(PipelineRun, "_start_query", start_query)
    dropped, _ = dropped_and_guarded(tmp_path)
    holding, failed = threading.Event(), []

    def another_job_makes_the_slot() -> None:
        """Holds the name's lock as another job's start does while it makes the slot, past the start's bound,
        then leaves the publication marked as that job's: the source's check under the lock refuses it."""
        try:
            with private_postgres.connect(db) as other, ownership.name_lock(other, SLOT):
                holding.set()
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    waited = _lock_wait_s(conn)
                    # held on past the start's bound; where the DROP_DATA pipeline started meanwhile, until
                    # its first batch has emptied its target (what the refusal comes too late to prevent)
                    if waited is not None and (not (dropped / "kept.json").exists() if len(started) > 1
                                               else waited >= WAITED_PAST_S):
                        break
                    time.sleep(0.1)
                else:
                    failed.append(f"the source waited on the slot name's lock: {_lock_wait_s(conn)}; started: "
                                  f"{started}")
                with other.transaction():
                    other.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE items").format(sql.Identifier(SLOT)))
                    ownership.mark(other, SLOT, OTHER_JOB)
        except Exception as exc:  # noqa: BLE001 - told by the test's assertion
            failed.append(repr(exc))
            holding.set()

    helper = threading.Thread(target=another_job_makes_the_slot, daemon=True)
    helper.start()
    assert holding.wait(30) and not failed, failed
    run = InProcessCluster(spark, str(tmp_path / "data")).run(_job(url, db, dropped), max_attempts=1)
    helper.join(30)
    assert not failed, failed
    assert run.status == "FAILED" and "belongs to SeaTide job 'other-job'" in run.error, run.error
    assert (dropped / "kept.json").exists(), f"emptied for a refused job: {sorted(p.name for p in dropped.iterdir())}"
    assert started == [["Console"]], f"a pipeline that removes data started before the source's refusal: {started}"
