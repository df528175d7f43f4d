"""A leader lease for a test whose subject is not how long a lease lasts.

The default lease lasts 2 s past its renewal, and these tests never renew it: on a loaded
machine (the suite run beside `stress-ng --cpu 2`, or beside other engineers' work) 2 s passed
between the election and the leader's next write, and the write was refused with ``NotLeader``
(seen: tests/store/test_release.py at load ≈14). A test that loses the lease on purpose
expires it in the store, as before; the tests of the lease's own timing set theirs.
"""

from __future__ import annotations

from seatide.coordinator.lease import LeaderLease
from seatide.store.sessions import again_on_new_session
from seatide.timeouts import Timeouts

HELD = Timeouts(lease_ttl=120.0, lease_renew=1.0)


def elected(store, name: str = "c1", url: str | None = None) -> LeaderLease:
    """``name`` elected leader, its lease lasting two minutes."""
    lease = LeaderLease(store, name, url, HELD)
    assert lease.tick()
    return lease


def lead_once(coordinator) -> bool:
    """A lease tick and, leading, a reconcile pass, taken again on a new session when the store's
    server ends it, as the coordinator's loop takes its tick (``Coordinator._loop``). Called bare,
    a pass starved past PostgreSQL's idle-in-transaction limit failed the test where the loop goes
    on (test_tick under a CPU hog, stop 56)."""
    def tick() -> bool:
        leading = coordinator.lease.tick()
        if leading:
            coordinator.reconcile_all()
        return leading
    return again_on_new_session(tick, what="a leader's tick by hand", within=coordinator.timeouts.lease_ttl)
