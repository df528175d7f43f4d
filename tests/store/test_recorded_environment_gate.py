"""Revisions 0021 and 0022 keep a SeaTide from before recorded environments from reading a marked job (outside
review M1, F3): that version knows no ``$env`` mark and would fill a marked job's ``${NAME}`` from its own
process's environment.

* One that starts refuses the store. Simulated as it is: this package's code, with its revisions cut back to
  the last one it shipped (0020) and that head, opening the store in a process of its own as every driver,
  worker and coordinator does when it starts.
* One already running cannot lead once the store is at 0022: the lease moved to a table it does not know. Its
  lease code is this package's naming the old table (tests/store/older_lease.py), on an engine of its own opened
  before the upgrade; no marked job is recorded until a coordinator of this version was elected through the new
  table, however long ago the older one last heartbeated.
* A worker already running has a presence row without ``features`` (it registered as that version does: no such
  column): the leader gives it no job (store/node_features.py). Its row is written as the older
  ``register_node`` wrote it.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest
from sqlalchemy import and_, insert, inspect, select, text, update

from seatide import intents
from seatide.coordinator.lease import LeaderLease
from seatide.coordinator.service import Coordinator, node_heartbeat, register_node
from seatide.intents import Refusal, RefusalKind
from seatide.runtime.reporter import AttemptReporter
from seatide.store import schema as s
from seatide.store.clock import read_store_now
from seatide.store.db import Store, open_store
from seatide.store.events import record_event
from seatide.store.liveness import liveness_for
from seatide.store.node_features import older_leader_may_act
from seatide.testing.cluster import wait_for
from seatide.timeouts import Timeouts
from tests.store.older_lease import before_0022, lease_as_before
from tests.store.test_store import _attempt, submit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BEFORE = "0020"      # the last revision of a SeaTide that did not record environments
JOB = """
env { job.mode = BATCH, job.name = ${SEATIDE_GATE_NAME} }
source { FakeSource { row.num = 1, schema = { fields { id = bigint } } } }
sink { Console {} }
"""
# A SeaTide that knows revisions up to BEFORE only, opening the store.
OLDER = """
import shutil, sys
from seatide.store import migrations
url, scripts, before = sys.argv[1:]
shutil.copytree(migrations.SCRIPTS, scripts, ignore=lambda _dir, names: [
    n for n in names if n == "__pycache__" or (n[:4].isdigit() and n[:4] > before)])
migrations.SCRIPTS, migrations.HEAD = scripts, before
from seatide.store.db import StoreUnavailable, open_store
try:
    open_store(url).dispose()
except StoreUnavailable as exc:
    print("REFUSED:", exc)
    sys.exit(3)
print("OPENED")
"""


def open_as_older(url: str, tmp_path) -> subprocess.CompletedProcess:
    scripts = tmp_path / f"older-{len(list(tmp_path.glob('older-*')))}"
    return subprocess.run([sys.executable, "-c", OLDER, url, str(scripts), BEFORE], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_a_seatide_from_before_recorded_environments_refuses_a_store_with_a_marked_job(store_url, tmp_path):
    store = open_store(store_url)
    try:
        # The store as the older version left it: its revision; that version opens it (the simulation is sound).
        with store.write() as conn:
            conn.execute(text(f"UPDATE alembic_version SET version_num = '{BEFORE}'"))
            conn.execute(text("ALTER TABLE nodes DROP COLUMN features"))
            lease_as_before(conn)
        older = open_as_older(store_url, tmp_path)
        assert (older.returncode, older.stdout.strip()) == (0, "OPENED"), older.stderr[-2000:]
    finally:
        store.dispose()

    store = open_store(store_url)      # this version: the gate's revision, then a job with its environment marked
    try:
        intents.submit(store, str(tmp_path), text=JOB, job_id="marked", actor="test",
                       environment={"SEATIDE_GATE_NAME": "as-submitted"})
        with store.read() as conn:
            variables = json.loads(conn.execute(select(s.jobs.c.variables)).scalar())
        assert variables == {"$env": "1", "$env.SEATIDE_GATE_NAME": "as-submitted", "$as-given": "1"}
    finally:
        store.dispose()

    older = open_as_older(store_url, tmp_path)
    assert older.returncode == 3, (older.stdout, older.stderr[-2000:])
    assert f"newer than this SeaTide (head {BEFORE}); upgrade SeaTide" in older.stdout, older.stdout
    assert "Traceback" not in older.stdout + older.stderr


def register_as_older(store, node_id: str, role: str, slots: int = 0, features: str | None = None) -> None:
    """The presence row an older SeaTide's process writes: the columns it knows, no ``features`` (before 0021), or
    the ``features`` of its release (0021's: ``recorded-environment``, no store revision)."""
    with store.write() as conn:
        register_as_older_conn(conn, node_id, role, slots, features=features)


def register_as_older_conn(conn, node_id: str, role: str, slots: int = 0, heartbeat_ago: float = 0.0,
                           features: str | None = None) -> None:
    now = read_store_now(conn)
    row = {} if features is None else {"features": features}
    conn.execute(insert(s.nodes).values(node_id=node_id, role=role, host="older-host", pid=4242, url=None,
                                        slots=slots, started_at=now - heartbeat_ago, heartbeat_at=now - heartbeat_ago,
                                        stopped=False, liveness=False, **row))


def _variables(store, job_id: str):
    with store.read() as conn:
        row = conn.execute(select(s.jobs.c.incarnation, s.jobs.c.variables).where(s.jobs.c.job_id == job_id)).first()
    return None if row is None else (row.incarnation, json.loads(row.variables))


def at_revision_0021(store) -> None:
    """The store as revision 0021 left it: the lease in ``leader_lease``."""
    with store.write() as conn:
        lease_as_before(conn)
        conn.execute(text("UPDATE alembic_version SET version_num = '0021'"))


def older_leader(store_url: str, node_id: str = "older-c", locked: bool = False,
                 timeouts: Timeouts = Timeouts()) -> LeaderLease:
    """A coordinator of the SeaTide from before 0022 (and before recorded environments) on the store at 0021, its
    own engine opened then (``Store``: no migration), that leads: elected, and a fenced leader write landed.
    ``locked``: holding the leader liveness lock, as that version does (revision 0006 on), and saying so."""
    store = Store(store_url)
    lease = LeaderLease(store, node_id, url=None, timeouts=timeouts,
                        liveness=liveness_for(store, timeouts) if locked else None)
    with before_0022():
        assert lease.tick()
        with lease.store.leader_tx(lease.epoch) as conn:
            record_event(conn, "OLDER_LEADER_WROTE", f"coordinator:{node_id}", epoch=lease.epoch)
    return lease


def submit_marked(store, tmp_path, job_id: str = "marked"):
    return intents.submit(store, str(tmp_path), text=JOB, job_id=job_id, actor="test",
                          environment={"SEATIDE_GATE_NAME": "as-submitted"})


def test_an_older_leader_can_no_longer_lead_once_the_store_moved_the_lease(store_url, tmp_path, caplog):
    store = open_store(store_url)
    submit_marked(store, tmp_path, "before")           # by a process of 0021, before the upgrade
    at_revision_0021(store)
    store.dispose()
    older = older_leader(store_url)
    epoch = older.epoch
    with older.store.write() as conn:    # paused (SIGSTOP, a frozen VM) an hour: far out of any heartbeat window
        register_as_older_conn(conn, "older-c", "coordinator", heartbeat_ago=3600.0)

    store = open_store(store_url)        # the upgrade (0022) by a process of this version
    try:
        with pytest.raises(Refusal) as refused:
            submit_marked(store, tmp_path)
        assert refused.value.kind == RefusalKind.CONFLICT
        message = str(refused.value)
        assert (f"no coordinator of this SeaTide has led since the store was upgraded to revision 0022: the lease "
                f"copied then (epoch {epoch}, coordinator older-c) may be held by a coordinator of an older SeaTide"
                ) in message, message
        assert "Nothing was submitted. Start a coordinator of this version" in message, message
        assert _variables(store, "marked") is None
        with pytest.raises(Refusal, match="Nothing was resumed"):     # a new incarnation of a marked row too
            intents.resume(store, "before", variables={"other": "1"}, fallback="fresh", actor="test")
        assert _variables(store, "before")[0] == 1
        with store.read() as conn:       # the lease as it was, and the epoch it had at the move
            row = conn.execute(select(s.leadership)).one()
            assert not inspect(conn).has_table("leader_lease")
        assert (row.node_id, row.epoch, row.moved_at_epoch) == ("older-c", epoch, epoch)

        with caplog.at_level(logging.WARNING, logger="seatide.coordinator.lease"), before_0022():
            # Its renewals fail on the missing table: it stops leading by its own rule once its lease would expire.
            wait_for(lambda: not older.tick(), timeout=30, message="the older leader to lose its lease")
            assert older.losses[-1].why == "could not renew in time"
            with pytest.raises(Exception, match="leader_lease"):         # its fenced writes fail at once
                with older.store.leader_tx(epoch) as conn:
                    record_event(conn, "OLDER_LEADER_WROTE", "coordinator:older-c", epoch=epoch)
            caplog.clear()
            assert not older.tick() and older.epoch is None              # nor can it be elected again
        assert "leader_lease" in caplog.text, caplog.text
        with pytest.raises(Refusal, match="Nothing was submitted"):      # lost, it is not known to have stopped acting
            submit_marked(store, tmp_path)

        leader = Coordinator(store, node_id="new-c")          # elected through the new table
        wait_for(leader.lease.tick, timeout=30, message="a coordinator of this version elected")
        assert leader.lease.epoch == epoch + 1
        submit_marked(store, tmp_path)
        assert _variables(store, "marked") == (1, {"$env": "1", "$env.SEATIDE_GATE_NAME": "as-submitted",
                                                   "$as-given": "1"})
        with before_0022():
            assert not older.tick()                          # and still cannot lead
        leader.lease.resign()
    finally:
        older.store.dispose()
        store.dispose()


# The older leader's lease outlasts the test's steps (its expiry is then reached by moving the row's, as the store's
# clock passing it would): a takeover before it is the lease's shortcut, never the expiry.
LONG = Timeouts(lease_ttl=600.0, lease_renew=1.0)


def _copied_lease_expires(store) -> None:
    with store.write() as conn:
        conn.execute(update(s.leadership).values(expires_at=read_store_now(conn) - 1.0))


def _elected_why(store, epoch: int) -> str:
    with store.read() as conn:
        return json.loads(conn.execute(select(s.events.c.detail).where(and_(
            s.events.c.kind == "LEADER_ELECTED", s.events.c.epoch == epoch))).scalar())["why"]


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_a_copied_lease_is_not_taken_early_when_the_older_leaders_lock_session_ends(store_url, tmp_path):
    """Outside review of leasemove, M1 (a): the older leader's liveness-lock session ends (a server restart,
    ``pg_terminate_backend``, keepalives) while its process lives, paused or between ticks. A follower then holds
    the lock and the row says the holder held it: the shortcut for a dead holder. On the copied lease it would
    open the gate while the older one still acts by its own clock; so the copied lease is taken at its expiry only.
    A leader of this version is still taken over at once when its lock is freed."""
    store = open_store(store_url)
    at_revision_0021(store)
    store.dispose()
    older = older_leader(store_url, locked=True, timeouts=LONG)
    store = open_store(store_url)                             # the upgrade to 0022
    try:
        with store.read() as conn:
            assert conn.execute(select(s.leadership.c.liveness, s.leadership.c.moved_at_epoch)).one() == (
                True, older.epoch)
        _lock_session_ends(store, older)
        new = LeaderLease(store, "new-c", None, LONG, liveness_for(store, LONG))
        wait_for(new._take_lock, timeout=30, message="the older leader's lock free")
        for _ in range(3):
            assert not new.tick()                             # holding the lock: still not before the expiry
        assert older.is_leader
        with store.read() as conn:
            assert older_leader_may_act(conn) is not None
        with pytest.raises(Refusal, match="Nothing was submitted"):
            submit_marked(store, tmp_path)

        _copied_lease_expires(store)
        wait_for(new.tick, timeout=30, message="the copied lease taken at its expiry")
        assert (new.epoch, _elected_why(store, new.epoch)) == (older.epoch + 1, "lease expired")
        submit_marked(store, tmp_path)

        # This version's leader, its lock freed while its lease runs (it died): taken over at once, as ever.
        follower = LeaderLease(store, "follower-c", None, LONG, liveness_for(store, LONG))
        _lock_session_ends(store, new)
        wait_for(follower.tick, timeout=30, message="this version's dead leader taken over by its lock")
        assert (follower.epoch, _elected_why(store, follower.epoch)) == (
            new.epoch + 1, "holder's liveness lock released")
        follower.resign()
    finally:
        older.store.dispose()
        store.dispose()


def _lock_session_ends(store, lease) -> None:
    with store.write() as conn:
        conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": lease.liveness._conn.info.backend_pid})


def test_a_coordinator_with_the_older_leaders_node_id_waits_for_the_copied_leases_expiry(store_url, tmp_path):
    """Outside review of leasemove, M1 (b): a coordinator of this version started with the older leader's
    ``--node-id`` (restarted in place while the older one is paused or cut off, or beside it) took the lease at
    once, as a coordinator retaking its own lease does, and opened the gate while the older one still acted."""
    store = open_store(store_url)
    at_revision_0021(store)
    store.dispose()
    older = older_leader(store_url, "coord-1", locked=True, timeouts=LONG)
    store = open_store(store_url)
    try:
        new = LeaderLease(store, "coord-1", None, LONG, liveness_for(store, LONG))
        for _ in range(3):
            assert not new.tick()
        with store.read() as conn:
            assert older_leader_may_act(conn) is not None
        with pytest.raises(Refusal, match="Nothing was submitted"):
            submit_marked(store, tmp_path)
        _copied_lease_expires(store)
        assert new.tick() and new.epoch == older.epoch + 1
        submit_marked(store, tmp_path)
        # Its own lease of this version it retakes at once after a restart, as before the move.
        again = LeaderLease(store, "coord-1", None, LONG)
        assert again.tick() and again.epoch == new.epoch + 1
        again.resign()
    finally:
        older.store.dispose()
        store.dispose()


def test_an_older_driver_and_worker_run_their_attempt_to_the_end_after_the_move(store_url, tmp_path):
    """Their writes are fenced by the attempt, never by the lease: the move takes nothing from them."""
    store = open_store(store_url)
    submit(store, tmp_path)
    attempt = _attempt(store, "j1")
    register_as_older(store, "w", "worker", slots=1)
    at_revision_0021(store)
    store.dispose()
    older = Store(store_url)             # opened at 0021, before the upgrade, as the older driver and worker did
    try:
        with before_0022():
            driver = AttemptReporter(older, "j1", 1, attempt)
            assert driver.batch_committed(1, 0, 10, 5, None, "f") == 1
            open_store(store_url).dispose()          # the upgrade, by a process of this version
            driver.heartbeat()
            node_heartbeat(older, "w")
            assert driver.batch_committed(1, 1, 10, 5, None, "f") == 2
            driver.pipeline_status(1, "FINISHED")
            driver.end_attempt(True)
        with older.read() as conn:
            assert conn.execute(select(s.attempts.c.state).where(s.attempts.c.attempt_id == attempt)).scalar() \
                == "SUCCEEDED"
            beat = conn.execute(select(s.nodes.c.heartbeat_at - s.nodes.c.started_at)).scalar()
        assert beat > 0
    finally:
        older.dispose()


def test_a_store_no_older_seatide_led_holds_nothing_back(store_url, tmp_path):
    store = open_store(store_url)        # made at 0022: nothing moved
    try:
        register_as_older(store, "older-c", "coordinator")          # alive, heartbeating: it cannot lead here
        submit_marked(store, tmp_path)
        assert _variables(store, "marked") == (1, {"$env": "1", "$env.SEATIDE_GATE_NAME": "as-submitted",
                                                   "$as-given": "1"})
        at_revision_0021(store)          # upgraded from 0021 before any coordinator was elected: epoch 0 moved
    finally:
        store.dispose()
    store = open_store(store_url)
    try:
        with store.read() as conn:
            assert conn.execute(select(s.leadership.c.epoch, s.leadership.c.moved_at_epoch)).one() == (0, 0)
        submit_marked(store, tmp_path, "after")
        assert _variables(store, "after")[1]["$env.SEATIDE_GATE_NAME"] == "as-submitted"
    finally:
        store.dispose()


@pytest.mark.parametrize("features", [None, "recorded-environment"], ids=["before-0021", "0021"])
def test_the_leader_gives_no_job_to_a_worker_of_an_older_seatide(store_url, tmp_path, features):
    """Before 0021 a worker's row says nothing; 0021's says ``recorded-environment`` and no store revision (outside
    review of leasemove, H1): its drivers would open the store, refuse revision 0022 as newer than their SeaTide,
    and the job would burn its retries and end FAILED. A worker is given a job only when its code heads the
    store's revision (store/node_features.py)."""
    store = open_store(store_url)
    leader = Coordinator(store, node_id="c1")
    try:
        register_as_older(store, "older-w", "worker", slots=4, features=features)   # idle, alive, heartbeating
        intents.submit(store, str(tmp_path), text=JOB, job_id="marked", actor="test",
                       environment={"SEATIDE_GATE_NAME": "as-submitted"})

        def assigned():
            with store.read() as conn:
                return conn.execute(select(s.attempts.c.worker_id).where(s.attempts.c.job_id == "marked")).all()

        for _ in range(3):
            leader.lease.tick()
            leader.reconcile_all()
        assert leader.lease.is_leader
        assert assigned() == []
        register_node(store, "new-w", "worker", slots=1)
        leader.reconcile_all()
        assert [row.worker_id for row in assigned()] == ["new-w"]
    finally:
        leader.lease.resign()
        store.dispose()
