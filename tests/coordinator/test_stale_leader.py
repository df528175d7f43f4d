"""A leader that read a job's row, then stalled across that run's cleanup, expiry, forget and a
resubmission (or a fresh resume) of the same job id, acts on what it read (issue 30, finding 5).

The rows it holds name a run that is over. What it does with them (remove pipeline directories,
put drivers down, drop replication slots) must reach nothing of the job id's new run: each
destructive step re-reads the row under the leader's transaction and compares the run
(coordinator/door.py). Both the former leader (its epoch is gone) and a leader that still leads
with an old row (the same node elected again) are refused.

The slot is a real one on a private PostgreSQL server: the release drops it by the run's names.
"""

from __future__ import annotations

import os
import time

import pytest
from sqlalchemy import insert, select, update

from seatide import failpoints
from seatide.config.loader import load_job_text
from seatide.connectors.postgres_cdc import slot
from seatide.coordinator.cleanup import due_results, reconcile_cleanup
from seatide.coordinator.lease import LeaderLease
from seatide.coordinator.release import RELEASING, Releaser, due_releases
from seatide.plan.dag import build_plan
from seatide.plan.outline import outline_json
from seatide.store import schema as s
from seatide.store.db import NotLeader
from seatide.store.jobs import submit_job
from seatide.store.restore import resume_job
from seatide.store.runs import run_key
from tests.leader import elected
from tests.store.test_runs import _make_checkpoint
from tests.store.test_store import store, submit  # noqa: F401  (store is a fixture)


def _leader(store, name: str) -> LeaderLease:
    return elected(store, name)


def _lose_lease(store) -> None:
    """The leader stalls past its lease: the next one is elected."""
    with store.write() as conn:
        conn.execute(update(s.leadership).values(expires_at=0.0))


def _job(store):
    with store.read() as conn:
        return conn.execute(select(s.jobs).where(s.jobs.c.job_id == "j1")).one()


def _end(store, status: str, cleanup: str) -> None:
    """The job's incarnation ends as the leader records it: its result names its run and config."""
    job, now = _job(store), time.time()
    with store.write() as conn:
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(status=status, finished_at=now))
        conn.execute(insert(s.job_results).values(
            job_id="j1", incarnation=job.incarnation, run_id=job.run_id, config=job.config,
            variables=job.variables, status=status, cleanup=cleanup, cleanup_due_at=now,
            cleanup_tries=0, next_cleanup_at=now, expires_at=now + 3600, created_at=now))


def _live_attempt(store) -> int:
    job = _job(store)
    with store.write() as conn:
        attempt = conn.execute(insert(s.attempts).values(
            job_id="j1", incarnation=job.incarnation, number=1, worker_id="w", state="RUNNING",
            created_at=time.time(), kill_requested=False, pid=os.getpid())).inserted_primary_key[0]
        conn.execute(update(s.jobs).values(current_attempt=attempt, status="RUNNING"))
    return attempt


def _dir(store) -> str:
    job = _job(store)
    with store.read() as conn:
        return conn.execute(select(s.pipelines.c.checkpoint_dir).where(
            s.pipelines.c.incarnation == job.incarnation)).scalar()


def _step(store, lease, row, killed: list) -> None:
    try:
        reconcile_cleanup(store, lease.epoch, f"coordinator:{lease.node_id}", row, killed.append)
    except NotLeader:
        pass                    # a former leader's store write is fenced; the question is what it did before


@pytest.mark.parametrize("acting", ["former leader", "leader with an old row"])
def test_a_stale_finished_dirty_row_never_reaches_the_resubmitted_run(store, tmp_path, acting):
    submit(store, tmp_path)
    _make_checkpoint(_dir(store))
    _end(store, "FINISHED", "DIRTY")
    slow = _leader(store, "slow")
    [stale] = due_results(store, time.time() + 60)          # read, then the leader stalls
    _lose_lease(store)
    fast = _leader(store, "fast")
    killed: list = []
    _step(store, fast, stale, killed)                       # the run's cleanup
    with store.write() as conn:
        conn.execute(update(s.job_results).values(expires_at=0.0))
    [expiring] = due_results(store, time.time())
    _step(store, fast, expiring, killed)                    # its expiry: the run's rows are forgotten
    with store.read() as conn:
        assert conn.execute(select(s.jobs)).all() == []
    submit(store, tmp_path)                                 # the same id again: incarnation 1 once more
    new = _dir(store)
    _make_checkpoint(new)
    _live_attempt(store)
    _step(store, slow if acting == "former leader" else fast, stale, killed)
    assert os.path.isfile(os.path.join(new, "seatide.json")), "the stale cleanup removed the new run's checkpoint"
    assert killed == [], "the stale cleanup put the new run's driver down"


def _cdc_job(server, table: str = "stale_leader", slot_name: str | None = None) -> str:
    """A Postgres-CDC job on one table of ``server`` (the slot named by SeaTide, or ``slot_name``)."""
    slot = f'\n    slot.name = "{slot_name}"' if slot_name else ""
    return f"""
source {{
  Postgres-CDC {{
    base-url = "{server.url}"
    username = "postgres"
    password = ""
    database-names = ["postgres"]
    schema-names = ["public"]
    table-names = ["postgres.public.{table}"]{slot}
  }}
}}
sink {{ Console {{}} }}
"""


def _make_slot(server, name: str, run: str | None = None) -> None:
    """A slot and publication as run ``run``'s driver makes them (marked SeaTide's, with the run;
    None: with the mark of a SeaTide before marks named a run)."""
    from psycopg import sql

    from seatide.connectors.postgres_cdc import ownership

    with server.connect() as conn:
        conn.execute(f'DROP PUBLICATION IF EXISTS "{name}"')
        conn.execute(f'CREATE PUBLICATION "{name}"')
        if run is not None:
            ownership.mark(conn, name, run)
        else:
            conn.execute(sql.SQL("COMMENT ON PUBLICATION {} IS {}").format(sql.Identifier(name),
                                                                          ownership.OLD_MARK))
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))


def _slots(server, prefix: str) -> list[str]:
    with server.connect() as conn:
        return [r[0] for r in conn.execute("SELECT slot_name FROM pg_replication_slots").fetchall()
                if r[0].startswith(prefix)]


@pytest.mark.parametrize("acting", ["former leader", "leader with an old row"])
def test_a_stale_releasing_row_never_drops_the_slot_of_a_fresh_resume(store, tmp_path, private_postgres, acting):
    text = _cdc_job(private_postgres)
    config = load_job_text(text)
    submit_job(store, text=text, variables={}, config=config, plan=build_plan(config),
               outline=outline_json(config), data_dir=str(tmp_path), job_id="j1")
    run = _job(store).run_id
    name = slot.default_name(run_key("j1", run), 1, "source0")
    prefix = slot.job_prefix(run_key("j1", run))
    for leftover in _slots(private_postgres, prefix):       # a parametrized twin's, on the shared server
        with private_postgres.connect() as conn:
            slot.drop(conn, leftover)
    _make_slot(private_postgres, name)
    _end(store, "CANCELED", "CLEAN")
    with store.write() as conn:                             # asked and decided by a leader whose drop failed once
        conn.execute(update(s.jobs).values(release=RELEASING))
    slow = _leader(store, "slow")
    [stale] = due_releases(store)                           # read, then the leader stalls
    _lose_lease(store)
    fast = _leader(store, "fast")
    Releaser(store, "coordinator:fast").step(fast.epoch, stale, 0.0)
    assert _slots(private_postgres, prefix) == [] and _job(store).release == "RELEASED"
    resume_job(store, "j1", plan=build_plan(config), text=text, variables={}, fallback="fresh")
    _make_slot(private_postgres, name)                      # the fresh incarnation's driver makes its slot
    try:
        lease = slow if acting == "former leader" else fast
        Releaser(store, f"coordinator:{lease.node_id}").step(lease.epoch, stale, 0.0)
    except NotLeader:
        pass
    assert _slots(private_postgres, prefix) == [name], "the stale release dropped the fresh incarnation's slot"
    with private_postgres.connect() as conn:
        slot.drop(conn, name)


def test_a_cleanup_that_fails_at_the_door_removes_nothing_and_is_taken_again(store, tmp_path, monkeypatch):
    """A step that fails as it enters the door (``coordinator.destructive_step``: the store gone,
    the leader killed there) has removed nothing and recorded nothing: the result stays DIRTY,
    and the next pass cleans the run up."""
    submit(store, tmp_path)
    checkpoint = _dir(store)
    _make_checkpoint(checkpoint)
    _end(store, "FINISHED", "DIRTY")
    lease = _leader(store, "c1")
    [due] = due_results(store, time.time() + 60)
    monkeypatch.setitem(failpoints._POINTS, "coordinator.destructive_step", "raise")
    try:
        reconcile_cleanup(store, lease.epoch, "coordinator:c1", due, [].append)
    except failpoints.FailpointError:
        pass            # (a pass that records the failure as a retry goes on too)
    assert os.path.isfile(os.path.join(checkpoint, "seatide.json"))
    with store.read() as conn:
        assert conn.execute(select(s.job_results.c.cleanup)).scalar() == "DIRTY"
    monkeypatch.delitem(failpoints._POINTS, "coordinator.destructive_step")
    [due] = due_results(store, time.time() + 3600)          # past any retry delay it was given
    reconcile_cleanup(store, lease.epoch, "coordinator:c1", due, [].append)
    assert not os.path.exists(os.path.join(checkpoint, "seatide.json"))
    with store.read() as conn:
        assert conn.execute(select(s.job_results.c.cleanup)).scalar() != "DIRTY"
