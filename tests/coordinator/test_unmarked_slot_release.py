"""A slot.name slot whose publication carries no comment (as a SeaTide before 08e5997 made it, and as
another consumer may) is not told apart on the server: a release neither drops it nor records itself done.
The step fails with the ways to settle it (RELEASE_RETRY), and passes once the publication says whose it
is (outside review rev2, F3: the release recorded RELEASED, the slot kept retaining WAL, only a log line).
A real slot on the private PostgreSQL server."""

from __future__ import annotations

import json

from sqlalchemy import select

from seatide.coordinator.release import RELEASING
from seatide.store import schema as s
from tests.coordinator.test_stale_leader import _leader, _slots
from tests.coordinator.test_user_named_slot import _cdc_job, _end, _release_step, _submit
from tests.store.test_store import store  # noqa: F401  (a fixture)

SLOT = "rev2_unmarked"


def test_a_release_on_a_slot_without_a_mark_is_not_recorded_done_and_says_how_to_settle_it(store, tmp_path,
                                                                                           private_postgres):
    _submit(store, tmp_path, _cdc_job(private_postgres, SLOT), "j1")
    with private_postgres.connect() as conn:
        conn.execute(f'DROP PUBLICATION IF EXISTS "{SLOT}"')
        conn.execute(f'CREATE PUBLICATION "{SLOT}"')                      # no comment
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (SLOT,))
    try:
        _end(store, "j1")
        lease = _leader(store, "c1")
        _release_step(store, "j1", lease.epoch)
        with store.read() as conn:
            assert conn.execute(select(s.jobs.c.release).where(s.jobs.c.job_id == "j1")).scalar() == RELEASING
            [retry] = [json.loads(e.detail) for e in conn.execute(select(s.events).where(
                s.events.c.job_id == "j1", s.events.c.kind == "RELEASE_RETRY"))]
        assert f"pg_drop_replication_slot('{SLOT}')" in retry["error"], retry
        assert "IS 'not SeaTide''s'" in retry["error"], retry
        assert _slots(private_postgres, SLOT) == [SLOT], "the release dropped a slot it cannot tell is the job's"
        with private_postgres.connect() as conn:                          # another consumer's, says its owner
            conn.execute(f"COMMENT ON PUBLICATION \"{SLOT}\" IS 'not SeaTide''s'")
        _release_step(store, "j1", lease.epoch, 100.0)                     # past the first try's backoff
        with store.read() as conn:
            assert conn.execute(select(s.jobs.c.release).where(s.jobs.c.job_id == "j1")).scalar() == "RELEASED"
        assert _slots(private_postgres, SLOT) == [SLOT], "another consumer's slot was dropped"
    finally:
        with private_postgres.connect() as conn:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s",
                         (SLOT,))
            conn.execute(f'DROP PUBLICATION IF EXISTS "{SLOT}"')
