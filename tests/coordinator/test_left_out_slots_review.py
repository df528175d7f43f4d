"""Outside review of 642a2cc/2e93916 (left-out pipelines' slots): demonstrating tests, product code untouched."""

from __future__ import annotations

from sqlalchemy import update

from seatide.connectors.postgres_cdc import slot
from seatide.coordinator.release import RELEASING, Releaser, due_releases
from seatide.coordinator.source_watch import SourceWatch
from seatide.store import schema as s
from tests.coordinator.test_left_out_slots import ONE, _end, _holds, _job, _left_out_slot
from tests.coordinator.test_stale_leader import _leader, _slots
from tests.store.test_store import store, submit  # noqa: F401  (store is a fixture)

# The current config (the one that left pipeline 2 out) stops loading, e.g. its sink's plugin is gone after an
# upgrade; nothing in it holds anything, so _may_hold says False.
UNLOADABLE = ONE.replace("Console", "RetiredSink")


def test_a_current_config_that_no_longer_loads_loses_the_left_out_slot(store, tmp_path, private_postgres):
    name = _left_out_slot(store, private_postgres, tmp_path)
    try:
        with store.write() as conn:
            conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(config=UNLOADABLE))
        lease = _leader(store, "c1")
        SourceWatch(store, lambda: lease.epoch, "coordinator:c1").run(lease.epoch)
        watched = [(h.pipeline_id, h.holds) for h in _holds(store)]
        _end(store)
        with store.write() as conn:
            conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(release=RELEASING))
        [due] = due_releases(store)
        Releaser(store, "coordinator:c1").step(lease.epoch, due, 0.0)
        released, left = _job(store).release, _slots(private_postgres, name)
        assert (watched, released, left) == ([(2, name)], "RELEASED", []), (
            f"left-out slot watched as {watched}; release recorded {released}; slot still on the server: {left}")
    finally:
        with private_postgres.connect() as conn:
            slot.drop(conn, name)


def test_an_earlier_config_that_no_longer_loads_hides_the_left_out_slot_and_blocks_the_release_for_good(
        store, tmp_path, private_postgres):
    """The config that names the left-out source is a stored result's, which the operator cannot edit: it stops
    loading (a plugin it used gone after an upgrade). The current config loads. The slot is not shown at all, and
    the release refuses 'its config no longer loads' even after the operator drops the slot by hand: for good."""
    from sqlalchemy import select
    name = _left_out_slot(store, private_postgres, tmp_path)
    try:
        with store.write() as conn:
            old = conn.execute(select(s.job_results.c.config).where(s.job_results.c.incarnation == 1)).scalar()
            conn.execute(update(s.job_results).where(s.job_results.c.incarnation == 1).values(
                config=old.replace("Console", "RetiredSink")))
        lease = _leader(store, "c1")
        SourceWatch(store, lambda: lease.epoch, "coordinator:c1").run(lease.epoch)
        watched = [(h.pipeline_id, h.holds, h.error) for h in _holds(store)]
        _end(store)
        with private_postgres.connect() as conn:       # the operator follows the message's second way
            slot.drop(conn, name)
        with store.write() as conn:
            conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(release=RELEASING))
        [due] = due_releases(store)
        Releaser(store, "coordinator:c1").step(lease.epoch, due, 0.0)
        with store.read() as conn:
            said = conn.execute(select(s.events.c.detail).where(s.events.c.kind == "RELEASE_RETRY")).scalars().all()
        assert watched != [] and _job(store).release == "RELEASED", (
            f"watched: {watched}; release: {_job(store).release}; slot gone: {_slots(private_postgres, name) == []}; "
            f"retry said: {said}")
    finally:
        with private_postgres.connect() as conn:
            slot.drop(conn, name)
