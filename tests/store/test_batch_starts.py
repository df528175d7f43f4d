"""The driver's record of each batch's start (store/batch_starts.py, revision 0015), on both stores.

What it is for (a Jdbc sink's batch written twice before, refused now) is told end to end by
tests/e2e/test_backup_older_than_own_commits.py; here (its fence: tests/store/test_store.py): the
number only grows within a lineage, another lineage replaces it, ``store/decided_batches.py`` counts
it as a decided batch, and a store at revision 0014 gains the columns and keeps its jobs.
"""

from __future__ import annotations

import os

from sqlalchemy import inspect, select, text

from seatide.runtime.commit_log import write_json_atomic
from seatide.runtime.reporter import AttemptReporter
from seatide.store import schema as s
from seatide.store.batch_starts import newest_start
from seatide.store.db import open_store
from seatide.store.decided_batches import lost_lineage, newest_decided
from seatide.store.migrations import current_revision, head
from tests.store.test_store import JOB, _attempt, store, submit  # noqa: F401  (store is a fixture)
from tests.store.older_lease import lease_as_before


def _started(store):
    with store.read() as conn:
        return newest_start(conn, "j1", 1, 1)


def test_a_batch_start_only_grows_within_its_lineage_and_another_lineage_replaces_it(store, tmp_path):
    submit(store, tmp_path)
    reporter = AttemptReporter(store, "j1", 1, _attempt(store, "j1"))
    assert _started(store) is None
    reporter.batch_started(1, 4, "l1")
    reporter.batch_started(1, 3, "l1")        # a replay of an older batch (a backup that holds its plan)
    assert (_started(store).batch, _started(store).lineage) == (4, "l1")
    reporter.batch_started(1, 0, "l2")        # a savepoint's copy: a new lineage from its own batch
    assert (_started(store).batch, _started(store).lineage) == (0, "l2")


def test_a_batch_begun_counts_as_decided_for_its_directory(store, tmp_path):
    """No decision in the store, no checkpoint row: only the start of batch 2 says a sink may have
    committed it. A directory with its lineage but without Spark's plan of batch 2 is refused."""
    submit(store, tmp_path, text="env { checkpoint.interval = 1000 }\n" + JOB)
    AttemptReporter(store, "j1", 1, _attempt(store, "j1")).batch_started(1, 2, "l1")
    with store.read() as conn:
        job = conn.execute(select(s.jobs)).one()
        directory = conn.execute(select(s.pipelines.c.checkpoint_dir)).scalar()
        decided = newest_decided(conn, job, 1, directory, 1, micro_batch=True)
    assert (decided.batch, decided.lineage, decided.checkpointed) == (2, "l1", None)
    write_json_atomic(os.path.join(directory, "seatide.json"), {"lineage": "l1"})
    assert "offsets/2 is missing" in lost_lineage(directory, decided)
    # Only begun, so said (outside review of the start record: "its sinks committed batch 2 ... one
    # taken after batch 2 was committed" sent an operator after a backup that may never exist)
    refusal = lost_lineage(directory, decided)
    assert decided.begun and "its sinks began batch 2 (a sink that commits in its own system may have" in refusal
    assert "committed batch 2" not in refusal.replace("may have committed", "")
    assert "one that holds Spark's plan of batch 2 (offsets/2)" in refusal
    write_json_atomic(os.path.join(directory, "seatide.json"), {"lineage": "l0"})
    assert "last committed batches under lineage l1 (up to batch 2)" in lost_lineage(directory, decided)


def test_a_store_at_revision_0014_gains_the_columns_and_keeps_its_jobs(store, store_url, tmp_path):
    submit(store, tmp_path)
    with store.write() as conn:
        for column in ("started_batch", "started_lineage", "waiting"):     # "waiting": revision 0018's
            conn.execute(text(f"ALTER TABLE pipelines DROP COLUMN {column}"))
        conn.execute(text("ALTER TABLE source_holds DROP COLUMN left_out"))     # revision 0016's
        conn.execute(text("DROP TABLE left_held"))                              # revision 0017's
        conn.execute(text("DROP INDEX ix_events_kind"))                         # revision 0019's
        conn.execute(text("ALTER TABLE nodes DROP COLUMN features"))            # revision 0021's
        lease_as_before(conn)                                                   # revision 0022's
        conn.execute(text("UPDATE alembic_version SET version_num = '0014'"))
    store.dispose()
    upgraded = open_store(store_url)
    with upgraded.read() as conn:
        assert current_revision(conn) == head()      # every later revision ran too (0020 only rewrites names)
        assert {"started_batch", "started_lineage", "waiting"} <= {c["name"] for c in inspect(conn).get_columns("pipelines")}
        assert conn.execute(select(s.pipelines.c.job_id, s.pipelines.c.started_batch)).all() == [("j1", None)]
    upgraded.dispose()
