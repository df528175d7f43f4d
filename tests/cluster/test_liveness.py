"""Instant failure detection: a dead leader or worker is replaced without waiting for its
lease or heartbeat to time out; a paused one still is not (DESIGN §1.6).

On the store with in-process leases (to lose a lock on purpose), and with real
coordinator and worker processes killed by SIGKILL or paused by SIGSTOP.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time

import psycopg
import pytest
from sqlalchemy import insert, select, text, update

from seatide import clock
from seatide.coordinator.lease import LeaderLease
from seatide.coordinator.service import Coordinator, register_node
from seatide.store import schema as s
from seatide.store.clock import read_store_now
from seatide.store.db import NotLeader, open_store
from seatide.store.liveness import AdvisoryLocks, liveness_for, worker_lock
from seatide.timeouts import Timeouts
from seatide.testing.driver_processes import DriverWatch, driver_pids
from seatide.testing.cluster import Cluster, assert_never_resurrected, batch_gate, wait_for
from seatide.testing.jobs import batch_job

pytestmark = pytest.mark.cluster

LONG_LEASE = Timeouts(lease_ttl=30.0, lease_renew=1.0)


def _lose_session(liveness) -> None:
    """Make a live holder lose its lock the way it can happen: on PostgreSQL the server ends
    its lock session (as a restart or pg_terminate_backend would); a file lock is only lost
    by closing it."""
    if isinstance(liveness, AdvisoryLocks):
        pid = liveness._conn.info.backend_pid
        admin = open_store(liveness.url)
        with admin.write() as conn:
            assert conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar()
        admin.dispose()
    else:
        liveness.close()


def test_a_follower_takes_over_at_once_when_the_leaders_lock_is_lost_and_the_old_epoch_is_fenced(store_url):
    store = open_store(store_url)
    la, lb = liveness_for(store, LONG_LEASE), liveness_for(store, LONG_LEASE)
    a = LeaderLease(store, "a", None, LONG_LEASE, la)
    b = LeaderLease(store, "b", None, LONG_LEASE, lb)
    try:
        assert a.tick() and not b.tick()
        assert not b.tick(), "b took over from a live leader that holds its lock"
        old = a.epoch
        _lose_session(la)
        # The lease has ~30 s left: only the lock lets b in, with the next epoch (a terminated
        # backend lets go of its locks a moment after the call returns: poll, well inside 30 s).
        wait_for(lambda: b.tick(), 5, interval=0.02, message="b to take over with the freed lock")
        assert b.epoch == old + 1
        with store.read() as conn:
            lease = conn.execute(select(s.leadership)).one()
        assert (lease.node_id, lease.liveness) == ("b", True)
        events = [e for e in _events(store) if e.kind == "LEADER_ELECTED"]
        assert "liveness lock" in events[-1].detail
        # a still believes it leads (its own clock says so) until its next tick: its writes are refused.
        assert a.is_leader
        with pytest.raises(NotLeader):
            with store.leader_tx(old) as conn:
                conn.execute(insert(s.events).values(at=time.time(), kind="ZOMBIE", detail="{}", epoch=old,
                                                     actor="a"))
        assert not [e for e in _events(store) if e.kind == "ZOMBIE"]
        # Its next tick sees the lock gone: it stops, and does not take the lease back.
        assert not a.tick() and not a.is_leader and a.lost.is_set()
        assert not a.tick() and b.tick() and b.epoch == old + 1
    finally:
        la.close()
        lb.close()
        store.dispose()


def test_a_leader_that_took_over_by_expiry_gets_the_lock_once_the_paused_one_lets_go(store_url):
    store = open_store(store_url)
    # A lease of 2 s: b's must outlive the few store round trips between its take-over and a's
    # wake-up even on a loaded host (at 0.6 s and load 25 it expired there, and a took the lease
    # back by expiry, rightly, under a newer epoch)
    short = Timeouts(lease_ttl=2.0, lease_renew=0.5)
    la, lb = liveness_for(store, short), liveness_for(store, short)
    a = LeaderLease(store, "a", None, short, la)
    b = LeaderLease(store, "b", None, short, lb)
    try:
        assert a.tick()
        old = a.epoch
        # a is "paused" (no more ticks) and keeps its lock: b waits for the expiry.
        began = time.monotonic()
        wait_for(lambda: b.tick(), 10, interval=0.05, message="b to take the expired lease")
        assert time.monotonic() - began >= 1.5, "b did not wait for the lease to expire"
        assert b.epoch == old + 1
        with store.read() as conn:
            assert conn.execute(select(s.leadership.c.liveness)).scalar() is False   # a still holds the lock
        # a wakes: fenced, it steps down, lets go of the lock and does not take the lease back.
        assert not a.tick() and not a.is_leader
        assert b.tick() and b.epoch == old + 1
        with store.read() as conn:
            assert conn.execute(select(s.leadership.c.liveness)).scalar() is True    # b holds it now
        assert not a.tick() and b.tick() and b.epoch == old + 1
    finally:
        la.close()
        lb.close()
        store.dispose()


def _events(store) -> list:
    with store.read() as conn:
        return list(conn.execute(select(s.events).order_by(s.events.c.seq)))


LEASE_TTL = 5.0


def _coordinator(cluster: Cluster, name: str):
    return cluster.coordinator(name, extra=["--lease-ttl", str(LEASE_TTL), "--lease-renew", "1"])


def test_a_killed_leader_is_replaced_before_its_lease_would_expire(cluster: Cluster):
    _coordinator(cluster, "c1")
    wait_for(lambda: cluster.leader().node_id == "c1" and cluster.leader().liveness, 10,
             message="c1 leads, holding its lock")
    _coordinator(cluster, "c2")
    cluster.leader_has_reconciled(1.0)
    last = cluster.leader()
    cluster.leader_proc().kill()
    killed = time.monotonic()
    taken = wait_for(lambda: (lambda l: l if l.node_id == "c2" else None)(cluster.leader()), LEASE_TTL,
                     interval=0.02, message=f"c2 to lead within the lease ttl ({LEASE_TTL:g} s)")
    took = time.monotonic() - killed
    assert taken.epoch == last.epoch + 1
    # By the store's clock, c2 took over while c1's lease still had time to run.
    assert taken.acquired_at < last.expires_at, (taken.acquired_at, last.expires_at)
    cluster.leader_has_reconciled(1.0)
    print(f"leader SIGKILL -> new leader in {took:.2f} s (lease ttl {LEASE_TTL:g} s)")


def test_a_paused_leader_is_replaced_only_when_its_lease_expires_and_finds_itself_fenced(cluster: Cluster):
    # The lease's own default length (Timeouts().lease_ttl, renewed every lease_renew), as every
    # other cluster test runs: that the takeover waits for the expiry is the subject, not how long
    # the lease is (LEASE_TTL, 5 s, is for the killed leader's race against it above).
    c1 = cluster.coordinator("c1")
    wait_for(lambda: cluster.leader().node_id == "c1" and cluster.leader().liveness, 10,
             message="c1 leads, holding its lock")
    cluster.coordinator("c2")
    cluster.leader_has_reconciled(1.0)
    c1.kill(signal.SIGSTOP)
    last = cluster.leader()           # c1 renews no more: this expiry is final
    try:
        taken = wait_for(lambda: (lambda l: l if l.node_id == "c2" else None)(cluster.leader()), Timeouts().lease_ttl + 10,
                         interval=0.05, message="c2 to take over once the lease expired")
    finally:
        c1.kill(signal.SIGCONT)
    resumed = time.time()
    # A paused process still holds its lock: only the expiry let c2 in.
    assert taken.epoch == last.epoch + 1
    assert taken.acquired_at >= last.expires_at, "c2 took over from a paused leader before its lease expired"
    # c1 wakes, finds itself fenced and lets go of the lock, which c2 then holds.
    wait_for(lambda: "lost leadership" in open(c1.log_path).read(), 15, message="c1 to see it is fenced")
    wait_for(lambda: cluster.leader().liveness, 10, message="c2 to hold the leader lock")
    cluster.leader_has_reconciled(1.0)
    lease = cluster.leader()
    assert (lease.node_id, lease.epoch) == ("c2", taken.epoch)
    stale = [e for e in cluster.events() if e.epoch == last.epoch and e.at > resumed]
    assert stale == [], f"the paused leader wrote after waking: {stale}"
    assert c1.alive


def test_a_killed_workers_job_is_replaced_before_its_heartbeat_would_time_out(cluster: Cluster, tmp_path):
    """The replacement, not the rest of the job: that it then finishes exactly once is story 5
    (test_failure_stories.py), which a Spark start-up or two more would only repeat here."""
    worker_lost_after = 20.0
    cluster.timeouts["worker"] = worker_lost_after
    cluster.coordinator("c1")
    # w1's driver commits one batch at most, then holds the next: the job is surely running
    # when w1 is killed, however fast the host.
    w1 = cluster.worker("w1", env=batch_gate(str(tmp_path / "never-opened"), passes=1))
    out = str(tmp_path / "out")
    with DriverWatch("instant-w") as watch:
        # A coordinator's first submit loads the planner: seconds on a loaded machine.
        cluster.submit(batch_job(out, rows=300, rows_per_batch=100), "instant-w", timeout=60)
        # Its driver RUNNING (it heartbeats before its Spark is up): what the leader sees of
        # the attempt is the same as after a batch, and no Spark start-up is waited for here.
        first = wait_for(lambda: next((a for a in cluster.attempts("instant-w") if a.state == "RUNNING" and a.pid),
                                      None), 120, message="the attempt RUNNING on w1")
        cluster.worker("w2")
        assert first.worker_id == "w1"
        w1.kill()
        killed = time.monotonic()
        replaced = wait_for(lambda: next((a for a in cluster.attempts("instant-w") if a.worker_id == "w2"), None),
                            worker_lost_after, interval=0.05,
                            message=f"a new attempt on w2 before the heartbeat timeout ({worker_lost_after:g} s)")
        took = time.monotonic() - killed
        lost = next(e for e in cluster.events("instant-w") if e.kind == "ATTEMPT_LOST")
        assert "liveness lock" in lost.detail, lost.detail
        assert first.pid not in driver_pids("instant-w"), "w1's driver outlived it"
        assert replaced.attempt_id > first.attempt_id
        # The new driver runs the job again (Spark start-up: slow on a loaded machine).
        wait_for(lambda: any(a.attempt_id >= replaced.attempt_id and a.state == "RUNNING"
                             for a in cluster.attempts("instant-w")), 300, message="the new attempt RUNNING")
    assert watch.max_seen <= 1
    assert cluster.job("instant-w").status not in ("FAILED", "CANCELED")
    assert_never_resurrected(cluster, "instant-w")
    print(f"worker SIGKILL -> replacement attempt assigned in {took:.2f} s "
          f"(heartbeat timeout {worker_lost_after:g} s)")


def test_a_free_worker_lock_is_seen_and_a_held_one_is_not(store_url, tmp_path):
    """The probe the leader makes each tick: a held lock is not free, a released one is, and
    probing never takes the lock away from its holder."""
    store = open_store(store_url)
    holder, watcher = liveness_for(store, Timeouts()), liveness_for(store, Timeouts())
    try:
        name = worker_lock("w/odd id")
        assert holder.hold(name)
        assert watcher.free_among([name, worker_lock("never-started")])[0] == {worker_lock("never-started")}
        assert holder.holds(name) and not watcher.hold(name)
        holder.release(name)
        with store.read() as conn:
            before = read_store_now(conn)
        free, seen_at = watcher.free_among([name])
        with store.read() as conn:
            after = read_store_now(conn)
        assert free == {name}
        # the store's time of the probe itself: a free streak never counts from before it
        assert before <= seen_at <= after
    finally:
        holder.close()
        watcher.close()
        store.dispose()


def test_a_second_worker_with_a_running_workers_node_id_is_refused(cluster: Cluster):
    cluster.worker("w1")
    twin = cluster._spawn("w1-twin", ["cluster", "worker", "--node-id", "w1", *cluster._common()])
    assert twin.popen.wait(timeout=60) == 2
    with open(twin.log_path) as handle:
        assert "another worker with node id 'w1' is running on this store" in handle.read()
    with cluster.store.read() as conn:      # the running one is untouched, and still says it holds its lock
        row = conn.execute(select(s.nodes).where(s.nodes.c.node_id == "w1")).one()
    assert row.liveness and row.pid != twin.popen.pid


def test_a_free_worker_lock_is_a_death_only_once_it_stayed_free_and_the_worker_silent(store_url):
    """Issue 21 finding 1: a server restart frees a live worker's lock. The leader takes the lock
    as a death only after it stayed free for ``lock_death_confirm_after`` with no heartbeat from
    the worker since it was first seen free (a live worker kills its drivers and comes back
    well within that)."""
    with _leader_beside_a_worker(store_url, "c-dead") as (store, coordinator, worker_locks):
        confirm = Timeouts().lock_death_confirm_after
        assert worker_locks.hold(worker_lock("w-dead"))
        register_node(store, "w-dead", "worker", slots=1, liveness=True)

        def dead_at(now: float) -> dict:
            return _dead_workers_at(coordinator, now)

        beat = _heartbeat_at(store, "w-dead")
        assert dead_at(beat + 0.1) == {}
        worker_locks.release(worker_lock("w-dead"))      # the session ended: the lock is free
        with store.read() as conn:
            released = read_store_now(conn)
        assert dead_at(released - 0.5) == {}       # a pass whose now was read well before its probe
        # First seen free when the probe read it, by the store's clock: not at the pass's ``now``
        # (a streak counted from then could end before the worker's window).
        first_seen = coordinator.lock_deaths.first_free[worker_lock("w-dead")].store_at
        assert released <= first_seen
        assert dead_at(first_seen + confirm - 0.05) == {}
        assert dead_at(first_seen + confirm) == {"w-dead": first_seen}
        with store.write() as conn:       # it came back: a heartbeat after its lock went free
            conn.execute(update(s.nodes).where(s.nodes.c.node_id == "w-dead").values(heartbeat_at=first_seen + 0.5))
        assert dead_at(first_seen + confirm + 0.1) == {}


def test_a_worker_dead_longer_than_its_heartbeat_timeout_is_seen_dead_by_its_lock_by_a_new_leader(store_url, caplog):
    """A new leader (the coordinator of a `seatide resume` started long after the run was killed)
    counts a worker's silence only from its own first look at the store (``reconcile.age``), so
    by heartbeat it takes the worker as lost only a whole ``worker_lost_after`` later. It reads
    that worker's lock meanwhile, and the death is confirmed as soon as for a worker that died a
    moment ago: a run killed long ago is resumed at least as fast as one killed just now.
    (Found under load: the resume's coordinator first looked more than worker_lost_after after
    the killed run's last heartbeat and sat in CREATED for that window.)"""
    with _leader_beside_a_worker(store_url, "c-new") as (store, coordinator, worker_locks):
        timeouts = Timeouts()
        caplog.set_level(logging.WARNING, logger="seatide.coordinator.service")
        assert worker_locks.hold(worker_lock("w-old"))
        register_node(store, "w-old", "worker", slots=1, liveness=True)
        worker_locks.release(worker_lock("w-old"))       # it died: its lock is free
        first_look = _heartbeat_at(store, "w-old") + timeouts.worker_lost_after + 1.0
        coordinator._observing_since = first_look        # as the leader's first pass sets it
        assert _dead_workers_at(coordinator, first_look) == {}
        confirmed = first_look + timeouts.lock_death_confirm_after
        assert confirmed < first_look + timeouts.worker_lost_after     # sooner than the heartbeat rule
        assert _dead_workers_at(coordinator, confirmed) == {"w-old": first_look}
        assert "worker w-old died: its liveness lock has been free" in caplog.text


def test_a_lock_seen_free_before_a_store_gap_is_confirmed_only_after_it(store_url):
    """The 2 s a free lock must stay free are this leader's own observation: a gap (the store
    unreachable) starts them again, as it starts the heartbeat rule's silence again. Else a
    lock seen free just before a 2 s store restart would be a death at the first look after
    it, before the worker's drivers had a beat's time to show they outlived it."""
    with _leader_beside_a_worker(store_url, "c-gap") as (store, coordinator, worker_locks):
        timeouts = Timeouts()
        assert worker_locks.hold(worker_lock("w-paused"))
        register_node(store, "w-paused", "worker", slots=1, liveness=True)
        worker_locks.release(worker_lock("w-paused"))
        seen_free = _heartbeat_at(store, "w-paused") + 1.0
        coordinator._observing_since = seen_free - 1.0
        assert _dead_workers_at(coordinator, seen_free) == {}
        coordinator.store_gap()                             # the store was away for a moment
        after_gap = seen_free + timeouts.lock_death_confirm_after + 0.5
        coordinator._observing_since = after_gap           # as the first pass after the gap sets it
        assert _dead_workers_at(coordinator, after_gap) == {}, "the free time before the gap was counted"
        confirmed = after_gap + timeouts.lock_death_confirm_after
        assert _dead_workers_at(coordinator, confirmed) == {"w-paused": after_gap}


@contextlib.contextmanager
def _leader_beside_a_worker(store_url, node_id: str):
    """A coordinator (not started: its verdicts are called one by one) and a worker's liveness
    locks, on the store at ``store_url``."""
    store = open_store(store_url)
    worker_locks, leader_locks = liveness_for(store, Timeouts()), liveness_for(store, Timeouts())
    try:
        yield store, Coordinator(store, node_id=node_id, liveness=leader_locks), worker_locks
    finally:
        worker_locks.close()
        leader_locks.close()
        store.dispose()


def _heartbeat_at(store, node_id: str) -> float:
    with store.read() as conn:
        return conn.execute(select(s.nodes.c.heartbeat_at).where(s.nodes.c.node_id == node_id)).scalar()


def _dead_workers_at(coordinator: Coordinator, now: float, local: float | None = None) -> dict:
    """The leader's verdict on the workers' locks at store time ``now``, from the nodes as stored,
    its own monotonic clock reading ``local`` (by default as far on as the store's time)."""
    with coordinator.store.read() as conn:
        workers = {n.node_id: n for n in conn.execute(select(s.nodes).where(s.nodes.c.role == "worker"))}
    previous = clock.use(time.time, monotonic=lambda: now if local is None else local)
    try:
        return coordinator._dead_workers(workers, now)
    finally:
        clock.use(previous)


def test_a_new_term_forgets_the_free_locks_seen_in_an_earlier_one(store_url, monkeypatch):
    """Outside review L1: a lock seen free in an earlier term may have been taken again and lost
    again while another coordinator led; a streak from then would be long at once. The watches
    are kept per term (the lease's epoch), whichever loop runs the pass."""
    with _leader_beside_a_worker(store_url, "c-term") as (store, coordinator, worker_locks):
        assert coordinator.lease.tick(), "elected"
        assert worker_locks.hold(worker_lock("w-term"))
        register_node(store, "w-term", "worker", slots=1, liveness=True)
        worker_locks.release(worker_lock("w-term"))
        coordinator._watching_epoch = coordinator.lease.epoch
        assert _dead_workers_at(coordinator, _heartbeat_at(store, "w-term") + 0.1) == {}
        monkeypatch.setattr(coordinator, "_snapshots", lambda now, local_now: ([], {}))   # the pass alone
        coordinator.reconcile_all()
        assert worker_lock("w-term") in coordinator.lock_deaths.first_free, "forgotten within one term"
        coordinator._watching_epoch = coordinator.lease.epoch - 1       # kept in an earlier term
        coordinator.reconcile_all()
        assert coordinator.lock_deaths.first_free == {}


def test_a_store_clock_stepped_forward_does_not_end_a_free_streak_early(store_url):
    """Stop 62 review round 4, L3: the worker times its window on its own monotonic clock, so a
    step forward of the store host's wall clock must not make the leader's streak look longer
    than it lasted. The verdict needs the window on the leader's monotonic clock too."""
    with _leader_beside_a_worker(store_url, "c-step") as (store, coordinator, worker_locks):
        confirm = Timeouts().lock_death_confirm_after
        assert worker_locks.hold(worker_lock("w-live"))
        register_node(store, "w-live", "worker", slots=1, liveness=True)
        worker_locks.release(worker_lock("w-live"))         # a server restart ended its session
        first = _heartbeat_at(store, "w-live") + 0.1
        assert _dead_workers_at(coordinator, first, local=100.0) == {}
        first = coordinator.lock_deaths.first_free[worker_lock("w-live")].store_at    # the probe's own time
        # The store's clock jumped 5 s: less than the heartbeat rule's window (else both rules
        # would judge every worker by that clock), more than the lock's.
        stepped = first + confirm + 5.0
        assert stepped + 0.1 - first < Timeouts().worker_lost_after
        assert _dead_workers_at(coordinator, stepped, local=100.0 + confirm / 2) == {}, \
            "a verdict before the window had passed in real time"
        assert _dead_workers_at(coordinator, stepped + 0.1, local=100.0 + confirm) == {"w-live": first}


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_a_lock_session_lost_on_our_side_alone_is_ended_so_the_lock_can_be_taken_again(store_url):
    """A connection that broke on the holder's side only (a failover's black hole; a check given
    up by the client's tcp_user_timeout) leaves its session alive at the server, holding the
    lock for minutes. The holder's next session ends it, and takes the lock back at once."""
    url = store_url
    locks, watcher = AdvisoryLocks(url, Timeouts()), AdvisoryLocks(url, Timeouts())
    name = worker_lock("w-black-holed")
    old = None
    try:
        assert locks.hold(name)
        old = locks._conn
        locks._forget_session()          # given up on our side, no goodbye reaching the server: it keeps the session
        pid = old.info.backend_pid
        assert not watcher.free_among([name])[0], "the old session should still hold the lock"
        assert locks.hold(name), "the lock was not taken back from our own old session"
        assert locks.holds(name) and locks._conn.info.backend_pid != pid
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0] == 0
    finally:
        if old is not None:
            old.close()
        locks.close()
        watcher.close()


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_every_store_connection_gives_up_on_a_black_hole_unless_its_url_says_otherwise(store_url):
    """The client keepalives and tcp_user_timeout are on the store's pool and the lock's session
    alike, as defaults: a setting the URL makes itself (a slow link) wins."""
    for url, user_timeout in ((store_url, "5000"), (store_url + "?tcp_user_timeout=20000", "20000")):
        store = open_store(url)
        locks = AdvisoryLocks(url, Timeouts())
        try:
            with store.engine.connect() as conn:
                pool_dsn = conn.connection.dbapi_connection.info.dsn
            assert locks.hold(worker_lock("w-dsn"))
            for dsn in (pool_dsn, locks._conn.info.dsn):
                assert f"tcp_user_timeout={user_timeout}" in dsn and "keepalives_idle=5" in dsn, dsn
        finally:
            locks.close()
            store.dispose()
