"""The leader lease: elect, keep, resign — each one short transaction.

The lease is one row (node, epoch, expiry). A coordinator takes it only when it has
expired, and taking it raises the epoch, so epochs order leaders. Expiry is judged by
the store's clock (``store/clock.py``), never a coordinator's, so hosts whose clocks
disagree cannot both hold it. The holder renews it every ``lease_renew``; if a renewal
does not land before the lease would expire, the holder stops acting as leader on its
own. It counts that on its monotonic clock from *before* each renewal's transaction,
so it stops no later than the store would let another take over (and every leader
write is fenced by epoch and expiry in the store anyway, so a paused leader that wakes
up changes nothing).

With liveness locks (``store/liveness.py``) a crash is seen at once. The leader also
holds the leader lock and says so in the lease row (``liveness``). A follower tries that
lock every tick; it may take the lease before it expires only when it now holds the lock
*and* the row says the holder held it: then the holder is dead. The takeover is the same
fenced transaction with a new epoch; only "expired" became "expired, or its holder's lock
is mine". A paused or partitioned leader still holds its lock, so the expiry stays the
backstop for it. Not on the lease revision 0022 copied from ``leader_lease`` (epoch ==
``moved_at_epoch``): its holder may be a SeaTide from before, which acts until that expiry
by its own clock, whatever became of its lock session; it is taken at its expiry only, by
any node id (store/node_features.py). A leader whose own lock is gone (its PostgreSQL lock session ended)
steps down at once: a follower may already be taking over. Every leader write stays
fenced by epoch (``leader_tx``), which orders it before or after such a takeover.

Tests wait on ``gained`` / ``lost`` instead of sleeping.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass

from sqlalchemy import and_, select, update

from seatide import clock, failpoints
from seatide.store import schema as s
from seatide.store.clock import store_now
from seatide.store.db import Store, record_event
from seatide.store.liveness import LEADER, Liveness
from seatide.store.node_features import copied_at_the_move
from seatide.store.sessions import again_on_new_session
from seatide.timeouts import Timeouts

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseLoss:
    """Why a leader stopped leading (not counting resignations): what an operator, and the
    scale bench, need to tell a slow loop from a store that refused or failed."""
    epoch: int
    why: str                   # "renewal refused", "could not renew in time", "its leader liveness lock was lost"
    since_renewal_s: float     # since the last renewal (or election) that landed began, on our monotonic clock
    slowest_step: str          # the holder loop's longest step since then (``LeaderLease.step``)
    slowest_step_s: float


class LeaderLease:
    def __init__(self, store: Store, node_id: str, url: str | None, timeouts: Timeouts = Timeouts(),
                 liveness: Liveness | None = None):
        self.store = store
        self.liveness = liveness       # None: the lease alone (the simulation, SEATIDE_LIVENESS_LOCKS=0)
        self._locked = False           # we hold the leader liveness lock
        self.node_id = node_id
        self.url = url
        self.timeouts = timeouts
        self.epoch: int | None = None
        self._valid_until = 0.0          # monotonic
        self._renewed_at = 0.0           # monotonic: when the last renewal (or election) began
        self.gained = threading.Event()
        self.lost = threading.Event()
        # Set when a tick could not reach the store; the coordinator takes it back (a blind
        # spot: silence seen across it is not counted against anyone, reconcile.age).
        self.blind = False
        self.losses: deque[LeaseLoss] = deque(maxlen=100)   # the newest losses
        self.losses_total = 0
        self._step = ("", 0.0)           # the holder loop's step in progress, and when it began
        self._slowest = ("", 0.0)        # its longest step since the last renewal that landed
        # The longest time between two renewals that landed, and the slowest step within it: how
        # close to the ttl the loop came, even when it did not lose the lease.
        self.widest_gap: tuple[float, str, float] = (0.0, "", 0.0)

    @property
    def is_leader(self) -> bool:
        # Our own clock bounds how long we may act: stop before others may take over.
        return self.epoch is not None and clock.monotonic() < self._valid_until

    def tick(self) -> bool:
        """Renew or try to take the lease; returns whether we hold it now."""
        try:
            if self.epoch is not None and self._locked and not self.liveness.holds(LEADER):
                # Our lock session ended: to everyone else we look dead, and a follower may be
                # taking over now. Stop acting; a later tick competes again like any follower.
                self._step_down("its leader liveness lock was lost")
                return False
            if self.epoch is not None and self._renew():
                return True
            if self.epoch is not None:
                self._drop("renewal refused")
            return self._try_elect()
        except Exception as exc:
            log.warning("lease tick failed: %s", exc)
            self.blind = True
            if self.epoch is not None and clock.monotonic() >= self._valid_until:
                self._drop("could not renew in time")
            return self.is_leader

    def renew_if_due(self) -> bool:
        """Within a long reconcile pass: renew once ``lease_renew`` has passed since the last
        renewal began, so a pass over thousands of jobs (or a burst of changes) never outlasts
        the lease. Returns whether we still lead, with the same epoch: it never elects (a pass
        begun under one epoch ends when that epoch does)."""
        if self.epoch is None:
            return False
        if clock.monotonic() - self._renewed_at >= self.timeouts.lease_renew:
            try:
                if not self._renew():
                    self._drop("renewal refused")
            except Exception as exc:
                log.warning("lease renewal failed: %s", exc)
                if clock.monotonic() >= self._valid_until:
                    self._drop("could not renew in time")
        return self.is_leader

    def step(self, doing: str) -> None:
        """The holder's loop begins a step (what it is doing): a loss records the slowest step
        since the last renewal that landed, which is what kept the loop from renewing."""
        now = clock.monotonic()
        name, began = self._step
        if name and now - began > self._slowest[1]:
            self._slowest = (name, now - began)
        self._step = (doing, now)

    def _landed(self, began: float) -> None:
        """A renewal (or election) that began at ``began`` landed: the lease runs a ttl from then."""
        self.step(self._step[0])
        if self._valid_until:
            gap = began - (self._valid_until - self.timeouts.lease_ttl)
            if gap > self.widest_gap[0]:
                self.widest_gap = (round(gap, 3), self._slowest[0], round(self._slowest[1], 3))
        self._slowest = ("", 0.0)
        self._valid_until = began + self.timeouts.lease_ttl

    def _take_lock(self) -> bool:
        """Try the leader liveness lock (without waiting); whether we hold it now."""
        if self.liveness is not None and not self._locked:
            try:
                self._locked = self.liveness.hold(LEADER)
            except Exception as exc:    # the lock is an accelerator: the lease works without it
                log.warning("leader liveness lock unavailable: %s", exc)
        return self._locked

    def _release_lock(self) -> None:
        if self._locked:
            self._locked = False
            try:
                self.liveness.release(LEADER)
            except Exception as exc:
                log.warning("could not release the leader liveness lock: %s", exc)

    def _renew(self) -> bool:
        """A renewal whose store session the server ended is taken again on a new one while the
        lease is still ours by our clock: a store restart must not cost a healthy leader its
        lease (nor its tick a blind spot). Taken twice it only extends the same epoch."""
        return again_on_new_session(self._renew_once, what="the lease renewal", within=self.timeouts.lease_ttl,
                                    holds=lambda: clock.monotonic() < self._valid_until)

    def _renew_once(self) -> bool:
        failpoints.hit("coordinator.before_lease_renew")
        # A leader that took over by expiry from a paused holder (who kept the lock) picks
        # the lock up once it is free, and says so with this renewal.
        self._take_lock()
        began = clock.monotonic()
        self._renewed_at = began
        with self.store.write() as conn:
            now = store_now(conn)
            done = conn.execute(update(s.leadership).where(and_(
                s.leadership.c.id == 1, s.leadership.c.node_id == self.node_id,
                s.leadership.c.epoch == self.epoch, s.leadership.c.expires_at >= now))
                .values(expires_at=now + self.timeouts.lease_ttl, liveness=self._locked)).rowcount == 1
        if done:
            self._landed(began)
        return done

    def _try_elect(self) -> bool:
        locked = self._take_lock()
        with self.store.write() as conn:
            # Our own clock's start is read once the transaction is ours (SQLite's write lock is
            # taken at its start) and before the store's clock is.
            began = clock.monotonic()
            # The row and the store's time in one statement: a follower slowed between two reads
            # would judge a lease renewed since by a stale expiry, and lock a healthy leader's row.
            query = select(s.leadership, store_now(conn).label("now")).where(s.leadership.c.id == 1)
            row = conn.execute(query).first()
            now = row.now
            if self._takeable(row, now, locked) and conn.dialect.name != "sqlite":
                # Lock the very row version judged takeable, and never wait for it. A row that
                # changed since (another follower elected, the holder renewed) is not locked: a
                # follower slowed after locking a healthy leader's row would hold up its renewal
                # and cost it the lease. A row another transaction holds is skipped, to try again
                # next tick: waiting would stamp our lease with the store time PostgreSQL read
                # before the wait (stop 58's paused-leader failure: a lease born expired, lost at
                # the first renewal). Without a wait, the statement's clock is the take's.
                row = conn.execute(query.where(s.leadership.c.epoch == row.epoch,
                                               s.leadership.c.expires_at == row.expires_at)
                                   .with_for_update(skip_locked=True)).first()
                if row is None:
                    self._release_lock()        # only the leader keeps it (see _drop)
                    return False
                now = row.now
            if not self._takeable(row, now, locked):
                # A live holder without the lock (it took over by expiry from a paused leader
                # that still held it): leave the lock to it rather than sit on it.
                self._release_lock()
                return False
            epoch = row.epoch + 1
            # The store's time once more, as the row is written: a pause since the judgment
            # shortens nothing (our own clock's start stays the earlier one).
            at = store_now(conn)
            taken = conn.execute(update(s.leadership).where(and_(
                s.leadership.c.id == 1, s.leadership.c.epoch == row.epoch)).values(
                node_id=self.node_id, epoch=epoch, expires_at=at + self.timeouts.lease_ttl,
                url=self.url, acquired_at=at, liveness=locked)).rowcount == 1
            if taken:
                early = row.expires_at >= now and row.node_id != self.node_id
                record_event(conn, "LEADER_ELECTED", f"coordinator:{self.node_id}", epoch=epoch,
                             previous=row.node_id, url=self.url,
                             why="holder's liveness lock released" if early else "lease expired")
        if taken:
            self.epoch = epoch
            self._renewed_at = began
            self._landed(began)
            self.lost.clear()
            self.gained.set()
            log.info("became leader with epoch %s", epoch)
        return taken

    def _takeable(self, row, now: float, locked: bool) -> bool:
        """Whether this coordinator may take the lease ``row`` at store time ``now``: it has
        expired, or it is our own (retaken after a restart), or its holder held the leader lock
        and now we do (it has died, or lost its lock session and steps down on its next tick;
        its writes are fenced by epoch). Neither of the last two on the lease copied at revision
        0022: its holder may be an older SeaTide, which steps down by its clock only (at the
        expiry), and the election past it is what lets marked jobs in (store/node_features.py):
        a lock session ended, or its --node-id reused, is no proof."""
        copied = copied_at_the_move(row)
        holder_dead = locked and row.liveness and not copied
        ours = row.node_id == self.node_id and not copied
        return row.expires_at < now or ours or holder_dead

    def _drop(self, why: str) -> None:
        if why == "resigned":
            log.info("lost leadership (epoch %s): %s", self.epoch, why)
        else:
            # _valid_until is counted from when the last renewal that landed began
            renewed = self._valid_until - self.timeouts.lease_ttl
            self.step(self._step[0])
            loss = LeaseLoss(self.epoch, why, round(clock.monotonic() - renewed, 3), self._slowest[0],
                             round(self._slowest[1], 3))
            self.losses.append(loss)
            self.losses_total += 1
            log.warning("lost leadership (epoch %s): %s; the last renewal that landed began %.2f s ago, "
                        "the slowest step since: %s (%.2f s)", loss.epoch, why, loss.since_renewal_s,
                        loss.slowest_step or "none", loss.slowest_step_s)
        self.epoch = None
        self._valid_until = 0.0
        # Only the leader keeps the lock: a follower holding it could take over from the next
        # leader the moment it is elected.
        self._release_lock()
        self.gained.clear()
        self.lost.set()

    def resign(self) -> None:
        """Give the lease up at once so another coordinator need not wait for the expiry."""
        self._step_down("resigned")

    def _step_down(self, why: str) -> None:
        """Stop leading now, and expire our epoch's lease so another need not wait for it."""
        if self.epoch is None:
            return
        try:
            with self.store.write() as conn:
                conn.execute(update(s.leadership).where(and_(
                    s.leadership.c.id == 1, s.leadership.c.epoch == self.epoch))
                    .values(expires_at=0.0))
        finally:
            self._drop(why)
