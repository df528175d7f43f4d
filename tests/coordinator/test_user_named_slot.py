"""A replication slot the user names (``slot.name``) is shared by every run that names it.

Slot names SeaTide makes carry the job and run (``connectors/postgres_cdc/slot.py``), so the
door's run fence (coordinator/door.py) is enough for them. A user-named slot has the same name
in every run of the job id, and in any other job naming it: the expiry of a dead run, or the
release of one job, must not drop the slot a newer run of the job id, or another job still
holding it, reads through. The slot is a real one on a private PostgreSQL server.
"""

from __future__ import annotations

import time

from sqlalchemy import select, update

from seatide.config.loader import load_job_text
from seatide.connectors.postgres_cdc import ownership
from seatide.coordinator.cleanup import due_results, reconcile_cleanup
from seatide.coordinator.release import RELEASING, Releaser, due_releases
from seatide.plan.dag import build_plan
from seatide.plan.outline import outline_json
from seatide.store import schema as s
from seatide.store.jobs import submit_job
from seatide.store.runs import run_key
from tests.coordinator.test_stale_leader import _cdc_job as stale_leader_job, _leader, _make_slot, _slots
from tests.store.test_store import store  # noqa: F401  (a fixture)

SLOT = "fix30_user_named"


def _cdc_job(server, slot_name: str = SLOT) -> str:
    return stale_leader_job(server, "user_named", slot_name)


def _submit(store, tmp_path, text: str, job_id: str) -> None:
    config = load_job_text(text)
    submit_job(store, text=text, variables={}, config=config, plan=build_plan(config),
               outline=outline_json(config), data_dir=str(tmp_path), job_id=job_id)


def _end(store, job_id: str, status: str = "CANCELED") -> None:
    """The job's incarnation ends, its cleanup done (CLEAN): the job id may be submitted again."""
    now = time.time()
    with store.write() as conn:
        job = conn.execute(select(s.jobs).where(s.jobs.c.job_id == job_id)).one()
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == job_id).values(status=status, finished_at=now))
        conn.execute(s.job_results.insert().values(
            job_id=job_id, incarnation=job.incarnation, run_id=job.run_id, config=job.config,
            variables=job.variables, status=status, cleanup="CLEAN", cleanup_due_at=now,
            cleanup_tries=0, next_cleanup_at=now, expires_at=now + 3600, created_at=now))


def _fresh_slot(server, run: str | None = None) -> None:
    """The slot as run ``run``'s driver makes it (None: as a SeaTide before marks named a run)."""
    if _slots(server, SLOT):                     # a parametrized twin's, on the shared server
        with server.connect() as conn:
            conn.execute("SELECT pg_drop_replication_slot(%s)", (SLOT,))
    _make_slot(server, SLOT, run)


def _run(store, job_id: str) -> str:
    with store.read() as conn:
        return run_key(job_id, conn.execute(select(s.jobs.c.run_id).where(s.jobs.c.job_id == job_id)).scalar())


def test_the_expiry_of_a_dead_run_keeps_the_user_named_slot_of_the_job_ids_new_run(store, tmp_path,
                                                                                   private_postgres):
    text = _cdc_job(private_postgres)
    _submit(store, tmp_path, text, "j1")
    _end(store, "j1")
    _submit(store, tmp_path, text, "j1")                     # the same id again: a new run, the same slot name
    _fresh_slot(private_postgres, _run(store, "j1"))         # the new run's driver makes its slot
    with store.write() as conn:                              # the first run's history expires
        conn.execute(update(s.job_results).where(s.job_results.c.incarnation == 1).values(expires_at=0.0))
    lease = _leader(store, "c1")
    [expiring] = [r for r in due_results(store, time.time()) if r.incarnation == 1]
    reconcile_cleanup(store, lease.epoch, "coordinator:c1", expiring, [].append)
    with store.read() as conn:
        assert conn.execute(select(s.job_results.c.incarnation)).scalars().all() == []    # it did expire
    assert _slots(private_postgres, SLOT) == [SLOT], "the dead run's expiry dropped the new run's slot"
    with private_postgres.connect() as conn:
        conn.execute("SELECT pg_drop_replication_slot(%s)", (SLOT,))


def _release_step(store, job_id: str, epoch: int, now: float = 0.0) -> None:
    """The leader's release step for ``job_id``, its release decided (RELEASING)."""
    with store.write() as conn:
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == job_id).values(release=RELEASING))
    [due] = due_releases(store)
    Releaser(store, "coordinator:c1").step(epoch, due, now)


def _released_for_good(store, job_id: str):
    """End job ``job_id``, take the lead and run its release step, which passes (RELEASED): the leader's lease."""
    _end(store, job_id)
    lease = _leader(store, "c1")
    _release_step(store, job_id, lease.epoch)
    with store.read() as conn:
        assert conn.execute(select(s.jobs.c.release).where(s.jobs.c.job_id == job_id)).scalar() == "RELEASED"
    return lease


def test_a_release_keeps_a_user_named_slot_another_live_job_names(store, tmp_path, private_postgres):
    text = _cdc_job(private_postgres)
    _submit(store, tmp_path, text, "j1")
    _submit(store, tmp_path, text, "j2")                     # another job reading through the same slot:
    _fresh_slot(private_postgres)                            # both from before marks named a run
    lease = _released_for_good(store, "j1")
    assert _slots(private_postgres, SLOT) == [SLOT], "j1's release dropped the slot j2 still reads through"
    with private_postgres.connect() as conn:                 # j2's resume, its checkpoint read through the slot,
        ownership.mark(conn, SLOT, _run(store, "j2"))        # marks it as its run's (ownership.claim)
    _end(store, "j2")                                        # and so its release drops it
    _release_step(store, "j2", lease.epoch)
    assert _slots(private_postgres, SLOT) == []


def test_a_release_leaves_an_old_marked_slot_its_run_did_not_mark_and_tells_the_operator(store, tmp_path,
                                                                                         private_postgres):
    """Review rev3: an old-marked slot (whose, not known) that no live job names in this store (a job of another
    deployment reads it, or a name built from pieces) is left by a release whose run did not mark it, which
    passes: the run may never have used it (refused on it at its fresh start). Review finding 4: it keeps
    retaining WAL, so the release says so where the operator looks (a RELEASE_LEFT_HELD warning event, the job's
    status), with the slot, why, the WAL it keeps and the SQL that settles it, not only in the leader's log."""
    from seatide.cli.client import retained_lines
    from seatide.store.views import job_events, job_info

    _submit(store, tmp_path, _cdc_job(private_postgres), "j1")
    _fresh_slot(private_postgres)
    _released_for_good(store, "j1")
    assert _slots(private_postgres, SLOT) == [SLOT], "a release dropped an old-marked slot its run did not mark"
    with store.read() as conn:
        left = [e for e in job_events(conn, "j1") if e["kind"] == "RELEASE_LEFT_HELD"]
        info = job_info(conn, "j1")
    assert len(left) == 1, f"the release left slot {SLOT} retaining WAL and said so in no event: {left}"
    told = left[0]["detail"]
    assert told["holds"] == SLOT and told["level"] == "WARNING" and told["connector"] == "Postgres-CDC", told
    assert "earlier SeaTide" in told["why"] and isinstance(told["retainedBytes"], int), told
    assert f"pg_drop_replication_slot('{SLOT}')" in told["settle"] and "resume that job" in told["settle"], told
    [shown] = [line for line in retained_lines(info) if line.startswith("LEFT")]
    assert SLOT in shown and told["settle"] in shown, shown
    with private_postgres.connect() as conn:                 # the shared server: left as the other tests find it
        conn.execute("SELECT pg_drop_replication_slot(%s)", (SLOT,))
        conn.execute(f'DROP PUBLICATION IF EXISTS "{SLOT}"')
