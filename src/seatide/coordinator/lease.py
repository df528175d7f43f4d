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

Tests wait on ``gained`` / ``lost`` instead of sleeping.
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy import and_, select, update

from seatide import clock, failpoints
from seatide.store import schema as s
from seatide.store.clock import store_now
from seatide.store.db import Store, record_event
from seatide.timeouts import Timeouts

log = logging.getLogger(__name__)


class LeaderLease:
    def __init__(self, store: Store, node_id: str, url: str | None, timeouts: Timeouts = Timeouts()):
        self.store = store
        self.node_id = node_id
        self.url = url
        self.timeouts = timeouts
        self.epoch: int | None = None
        self._valid_until = 0.0          # monotonic
        self._renewed_at = 0.0           # monotonic: when the last renewal (or election) began
        self.gained = threading.Event()
        self.lost = threading.Event()

    @property
    def is_leader(self) -> bool:
        # Our own clock bounds how long we may act: stop before others may take over.
        return self.epoch is not None and clock.monotonic() < self._valid_until

    def tick(self) -> bool:
        """Renew or try to take the lease; returns whether we hold it now."""
        try:
            if self.epoch is not None and self._renew():
                return True
            if self.epoch is not None:
                self._drop("renewal refused")
            return self._try_elect()
        except Exception as exc:
            log.warning("lease tick failed: %s", exc)
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

    def _renew(self) -> bool:
        failpoints.hit("coordinator.before_lease_renew")
        began = clock.monotonic()
        self._renewed_at = began
        with self.store.write() as conn:
            now = store_now(conn)
            done = conn.execute(update(s.leader_lease).where(and_(
                s.leader_lease.c.id == 1, s.leader_lease.c.node_id == self.node_id,
                s.leader_lease.c.epoch == self.epoch, s.leader_lease.c.expires_at >= now))
                .values(expires_at=now + self.timeouts.lease_ttl)).rowcount == 1
        if done:
            self._valid_until = began + self.timeouts.lease_ttl
        return done

    def _try_elect(self) -> bool:
        began = clock.monotonic()
        with self.store.write() as conn:
            query = select(s.leader_lease, store_now(conn).label("now")).where(s.leader_lease.c.id == 1)
            row = conn.execute(query).first()
            if row.expires_at >= row.now and row.node_id != self.node_id:
                return False
            epoch = row.epoch + 1
            taken = conn.execute(update(s.leader_lease).where(and_(
                s.leader_lease.c.id == 1, s.leader_lease.c.epoch == row.epoch)).values(
                node_id=self.node_id, epoch=epoch, expires_at=row.now + self.timeouts.lease_ttl,
                url=self.url, acquired_at=row.now)).rowcount == 1
            if taken:
                record_event(conn, "LEADER_ELECTED", f"coordinator:{self.node_id}", epoch=epoch,
                             previous=row.node_id, url=self.url)
        if taken:
            self.epoch = epoch
            self._renewed_at = began
            self._valid_until = began + self.timeouts.lease_ttl
            self.lost.clear()
            self.gained.set()
            log.info("became leader with epoch %s", epoch)
        return taken

    def _drop(self, why: str) -> None:
        (log.info if why == "resigned" else log.warning)("lost leadership (epoch %s): %s", self.epoch, why)
        self.epoch = None
        self._valid_until = 0.0
        self.gained.clear()
        self.lost.set()

    def resign(self) -> None:
        """Give the lease up at once so another coordinator need not wait for the expiry."""
        if self.epoch is None:
            return
        try:
            with self.store.write() as conn:
                conn.execute(update(s.leader_lease).where(and_(
                    s.leader_lease.c.id == 1, s.leader_lease.c.epoch == self.epoch))
                    .values(expires_at=0.0))
        finally:
            self._drop("resigned")
