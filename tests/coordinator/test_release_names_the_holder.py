"""A release that finds the run's slot held by another process (here ``pg_recvlogical``) gives up within
the step's bound and says who holds it, in the RELEASE_RETRY event the leader records, not only "did
not answer" (each source's own bound ends before the step's: coordinator/source_release.py). The slot
is left as it was, and dropped by a later try once it is free. Real slot on the private PostgreSQL."""

from __future__ import annotations

import json
import time

from sqlalchemy import select

from seatide.coordinator.release import Releaser, due_releases
from seatide.coordinator.source_release import OUTSIDE_WAIT_S
from seatide.store import schema as s
from tests.coordinator.test_release_holds_no_lock import _hold, cancelled_with_a_slot, sqlite_store  # noqa: F401
from tests.coordinator.test_stale_leader import _leader, _slots


def _retries(store) -> list[dict]:
    with store.read() as conn:
        return [json.loads(d) for d in conn.execute(select(s.events.c.detail).where(
            s.events.c.kind == "RELEASE_RETRY").order_by(s.events.c.seq)).scalars()]


def test_a_release_on_a_slot_another_process_holds_is_bounded_and_names_the_holder(sqlite_store, tmp_path,
                                                                                   private_postgres):
    store = sqlite_store
    name = cancelled_with_a_slot(store, tmp_path, private_postgres)
    holder = _hold(private_postgres, name)
    try:
        with private_postgres.connect() as conn:
            pid = conn.execute("SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s", (name,)).fetchone()[0]
        lease = _leader(store, "c1")
        [due] = due_releases(store)
        releaser = Releaser(store, "coordinator:c1")
        began = time.monotonic()
        releaser.step(lease.epoch, due, 0.0)
        took = time.monotonic() - began
        assert took < OUTSIDE_WAIT_S + 1.0, f"the release step took {took:.1f} s (bound {OUTSIDE_WAIT_S} s)"
        [retry] = _retries(store)
        assert f"replication slot '{name}' is still held" in retry["error"] and f"PID {pid}" in retry["error"], retry
        assert "pg_terminate_backend" in retry["error"] and retry["lasting"] is False, retry
        assert _slots(private_postgres, name) == [name], "the held slot was not left as it was"
    finally:
        holder.terminate()
        holder.wait(10)
    deadline = time.monotonic() + 30
    now = 100.0
    while _slots(private_postgres, name):     # tried again past its backoff, the slot now free
        assert time.monotonic() < deadline, "the release was not done once the slot was free"
        [due] = due_releases(store)
        releaser.step(lease.epoch, due, now)
        now += 100.0
        time.sleep(0.1)
