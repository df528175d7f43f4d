"""The running-jobs list reads a fixed number of queries however many jobs run, and each
row says what the one-job view says of that job."""

from __future__ import annotations

import time

from sqlalchemy import event, func, select, update

from seatide.store import schema as s
from seatide.store.db import open_store
from seatide.store.jobs import job_view
from seatide.store.states import JOB_TERMINAL
from seatide.store.checkpoint_views import checkpoint_stats, checkpoint_summary
from seatide.store.views import job_rows
from seatide.testing.fleet import submit_fleet_jobs


def _run_with_checkpoints(store, ids, batches: int) -> None:
    """Jobs RUNNING with a RUNNING pipeline and ``batches`` checkpoints (the second FAILED), as a
    driver leaves them, two more COMPLETED ones pruned by retention: the rows, and the pipeline
    row's totals (the newest, ``batches``, is COMPLETED)."""
    now = time.time()
    with store.write() as conn:
        conn.execute(update(s.jobs).where(s.jobs.c.job_id.in_(ids)).values(status="RUNNING"))
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id.in_(ids)).values(
            status="RUNNING", started_at=now, rows_written=batches, restores=1, checkpoints_completed=batches - 1 + 2,
            checkpoints_failed=1, last_checkpoint_id=batches, last_checkpoint_at=now + batches - 1,
            last_checkpoint_duration_ms=batches - 1, last_checkpoint_rows=batches - 1))
        for job_id in ids:
            for batch in range(batches):
                conn.execute(s.checkpoints.insert().values(
                    job_id=job_id, incarnation=1, checkpoint_id=batch + 1, pipeline_id=0, batch_id=batch,
                    kind="CHECKPOINT", status="FAILED" if batch == 1 else "COMPLETED", created_at=now + batch,
                    duration_ms=batch, rows=batch, source_offsets=None, fingerprint="fp", attempt_id=1))


def _savepoint_after(store, job_id: str) -> None:
    """A completed savepoint newer than the job's checkpoints."""
    with store.write() as conn:
        newest = conn.execute(select(func.max(s.checkpoints.c.checkpoint_id)).where(
            s.checkpoints.c.job_id == job_id)).scalar()
        conn.execute(s.checkpoints.insert().values(
            job_id=job_id, incarnation=1, checkpoint_id=newest + 1, pipeline_id=0, batch_id=newest, kind="SAVEPOINT",
            status="COMPLETED", created_at=time.time() + 10, duration_ms=1, rows=0, source_offsets=None,
            fingerprint="fp", attempt_id=1))


def _selects(store, call) -> int:
    statements = []

    def count(_conn, _cursor, statement, *_args):
        statements.append(statement)
    event.listen(store.engine, "before_cursor_execute", count)
    try:
        call()
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    return len([q for q in statements if q.lstrip().upper().startswith("SELECT")])


def test_running_jobs_take_the_same_queries_for_one_job_or_twenty_and_match_the_job_view(store_url, tmp_path):
    store = open_store(store_url)
    try:
        first = submit_fleet_jobs(store, str(tmp_path), 1, prefix="one")
        _run_with_checkpoints(store, first, 3)
        with store.read() as conn:
            one = _selects(store, lambda: job_rows(conn, exclude=set(JOB_TERMINAL)))
        more = submit_fleet_jobs(store, str(tmp_path), 19, prefix="more")
        _run_with_checkpoints(store, more, 4)
        _savepoint_after(store, "more-00001")
        with store.write() as conn:    # caught up with its sources: IDLE, not stale
            conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "more-00002").values(idle=True))
        with store.read() as conn:
            twenty = _selects(store, lambda: job_rows(conn, exclude=set(JOB_TERMINAL)))
            rows = job_rows(conn, exclude=set(JOB_TERMINAL))
            assert conn.execute(select(func.count()).select_from(s.checkpoints)).scalar() == 3 + 19 * 4 + 1
            now = time.time()
            for row in rows:
                view = job_view(conn, row["jobId"])
                expected = checkpoint_summary(view.job, checkpoint_stats(conn, view.job, view.pipelines), view.pipelines, now)
                got = row["checkpoint"]
                for key in ("lastCheckpointId", "lastCheckpointTime", "completed", "failed", "restored", "health"):
                    assert got[key] == expected[key], (row["jobId"], key)
        assert one == twenty, f"{one} queries for one job, {twenty} for twenty"
        assert len(rows) == 20
        by_id = {row["jobId"]: row["checkpoint"] for row in rows}
        # 4 batches, the second FAILED: newest COMPLETED is id 4; 3 completed + 2 pruned, 1 failed
        assert (by_id["more-00000"]["lastCheckpointId"], by_id["more-00000"]["completed"],
                by_id["more-00000"]["failed"], by_id["more-00000"]["restored"]) == (4, 5, 1, 1)
        assert (by_id["more-00000"]["lastCheckpointDurationMs"], by_id["more-00000"]["lastCheckpointRows"]) == (3, 3)
        # the savepoint (the job's own row, not in the pipelines' totals) is counted and is the newest
        assert (by_id["more-00001"]["lastCheckpointId"], by_id["more-00001"]["completed"],
                by_id["more-00001"]["lastCheckpointDurationMs"]) == (5, 6, 1)
        assert by_id["more-00002"]["health"] == "IDLE"
        assert {by_id[k]["health"] for k in by_id if k != "more-00002"} == {"HEALTHY"}
    finally:
        store.dispose()


def test_seatunnels_running_jobs_list_takes_the_same_queries_for_one_job_or_twenty(store_url, tmp_path):
    """SeaTunnel's GET /running-jobs read each job on its own and parsed its config each time:
    35 s for a thousand running jobs. Now a fixed number of queries, and a config parsed once."""
    from seatide.api import seatunnel_views

    store = open_store(store_url)
    try:
        first = submit_fleet_jobs(store, str(tmp_path), 1, prefix="one")
        _run_with_checkpoints(store, first, 3)
        with store.read() as conn:
            one = _selects(store, lambda: seatunnel_views.running_jobs(conn))
        more = submit_fleet_jobs(store, str(tmp_path), 19, prefix="more")
        _run_with_checkpoints(store, more, 4)
        _savepoint_after(store, "more-00001")
        with store.write() as conn:    # caught up with its sources: IDLE, not stale
            conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "more-00002").values(idle=True))
        with store.read() as conn:
            twenty = _selects(store, lambda: seatunnel_views.running_jobs(conn))
            rows = seatunnel_views.running_jobs(conn)
            one_by_one = {job_id: seatunnel_views.job_info(conn, job_id) for job_id in first + more}
        assert one == twenty, f"{one} queries for one job, {twenty} for twenty"
        assert [row["jobId"] for row in rows] == first + more
        for row in rows:      # what the one-job answer says of the same job
            info = one_by_one[row["jobId"]]
            assert (row["jobDag"], row["envOptions"], row["metrics"]) == (
                info["jobDag"], info["envOptions"], info["metrics"])
        assert rows[0]["jobDag"]["vertexInfoMap"] and rows[0]["envOptions"]
        # Jobs recorded before their outline was stored (revision 0009) show the same, parsed.
        with store.write() as conn:
            conn.execute(update(s.jobs).values(outline=None))
        with store.read() as conn:
            assert seatunnel_views.running_jobs(conn) == rows
    finally:
        store.dispose()
