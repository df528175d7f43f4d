"""Whose a slot.name is (connectors/postgres_cdc/ownership.py): a job's release never drops the slot
another job made, a job's own starts are never refused, and a slot made by a SeaTide whose mark named
no run is resumed and released by its job as before. Real slots on the private PostgreSQL
(wal_level = logical); the stream reader alone, no Spark."""

from __future__ import annotations

import logging

from psycopg import sql

from seatide.connectors.postgres_cdc import ownership, slot
from tests.connectors.test_postgres_cdc import cdc_source, read_rows, shop  # noqa: F401
from tests.connectors.test_postgres_cdc_held_slot_review import _reader

A, A_LATER, B = "job-a.0123456789ab", "job-a.aaaaaaaaaaaa", "job-b.ba9876543210"


def _started(conn, url: str, db: str, run: str, name: str):
    """Run ``run``'s reader on slot.name ``name``, its first batch of changes read and committed: (reader, end)."""
    reader = _reader(url, db, run, name)
    start = reader.latestOffset(reader.initialOffset())
    conn.execute("INSERT INTO items (id) VALUES (5000)")
    end = reader.latestOffset(start)
    assert [r["id"] for r in read_rows(reader, start, end)] == [5000]
    reader.commit(end)
    return reader, end


def test_a_jobs_release_leaves_the_slot_another_job_made_with_the_same_slot_name(shop, caplog):  # noqa: F811
    """Job b names job a's slot (a copy-paste): b's release, as b ends, leaves the slot and its position,
    saying whose it is; a's own release then drops it, even while b (ended, not yet released) names it."""
    conn, url, db = shop
    name = "owner_release"
    a, _ = _started(conn, url, db, A, name)
    a.stop()
    conn.execute("INSERT INTO items (id) VALUES (5001)")              # job a has not read this yet
    before = slot.state(conn, name)
    source = cdc_source(url, f"{db}.public.items", f'slot.name = "{name}"')
    with caplog.at_level(logging.WARNING, logger="seatide.connectors.postgres_cdc"):
        source.release(B, within_s=1.5)
    assert slot.state(conn, name) == before, "job b's release dropped or moved job a's slot"
    assert any(f"job {B}: its release leaves replication slot '{name}'" in m and "job 'job-a'" in m
               for m in caplog.messages), caplog.messages
    source.release(A, keep=frozenset({name}), within_s=1.5)
    assert slot.state(conn, name) is None, "job a's release left the slot it made"
    assert conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (name,)).fetchone() is None


def test_only_another_jobs_mark_refuses_a_fresh_start(shop):  # noqa: F811
    """The run that made the slot (a new attempt) and a later run of its job id (a submission again) may
    start afresh on it; another job may not, nor anyone on a slot SeaTide did not make."""
    conn, url, db = shop
    name = "owner_rules"
    a, _ = _started(conn, url, db, A, name)
    a.stop()
    assert ownership.owner(conn, name) == ownership.Owner(ownership.Held.RUN, A)
    assert ownership.fresh_start_refusal(conn, name, A) is None
    assert ownership.fresh_start_refusal(conn, name, A_LATER) is None
    assert "belongs to SeaTide job 'job-a' (run 0123456789ab)" in ownership.fresh_start_refusal(conn, name, B)
    conn.execute(sql.SQL("COMMENT ON PUBLICATION {} IS 'mine'").format(sql.Identifier(name)))
    assert "was not made by SeaTide" in ownership.fresh_start_refusal(conn, name, A)


def test_a_slot_with_the_mark_of_an_earlier_seatide_is_resumed_and_released_by_its_job(shop):  # noqa: F811
    """A slot made before marks named a run (the publication carries the old mark): its job, upgraded, resumes
    from its checkpoint and reads every change, which marks the slot as its run's (its checkpoint has read
    through it: review rev2, F2), so it may start afresh on it, another job may not, and its release drops it."""
    conn, url, db = shop
    name = "owner_upgraded"
    a, end = _started(conn, url, db, A, name)
    a.stop()
    conn.execute(sql.SQL("COMMENT ON PUBLICATION {} IS {}").format(sql.Identifier(name), ownership.OLD_MARK))
    conn.execute("INSERT INTO items (id) VALUES (5002)")
    resumed = _reader(url, db, A, name)                               # the upgraded driver of the same run
    try:
        later = resumed.latestOffset(end)
        assert [r["id"] for r in read_rows(resumed, end, later)] == [5002]
    finally:
        resumed.stop()
    assert ownership.owner(conn, name) == ownership.Owner(ownership.Held.RUN, A), "the resume did not mark it"
    assert ownership.fresh_start_refusal(conn, name, A) is None
    assert "belongs to SeaTide job 'job-a'" in ownership.fresh_start_refusal(conn, name, B)
    cdc_source(url, f"{db}.public.items", f'slot.name = "{name}"').release(A, within_s=1.5)
    assert slot.state(conn, name) is None, "the old-marked slot was left by its job's release"


def test_a_resumes_position_check_marks_an_old_marked_slot_it_read_through_never_an_unmarked_one(shop):  # noqa: F811
    """The check a resume makes of the checkpoint's position (position_gone, asked also for a resume --fallback
    fresh) marks a slot an earlier SeaTide marked (OLD_MARK) as the run's when the checkpoint has read through
    it, so that resume's fresh start may replace it; a checkpoint the slot has moved past (the slot read by
    something else since) marks nothing. A slot without any mark is never marked (review rev3: a lagging
    consumer's passes the test too): the fresh start stays refused, saying how to mark it as SeaTide's."""
    conn, url, db = shop
    name = "owner_checked"
    a, end = _started(conn, url, db, A, name)
    a.stop()
    conn.execute(sql.SQL("COMMENT ON PUBLICATION {} IS NULL").format(sql.Identifier(name)))
    source = cdc_source(url, f"{db}.public.items", f'slot.name = "{name}"')
    assert source.position_gone(A, 0, "source[0]", end, 5.0) is None
    assert ownership.owner(conn, name).held is ownership.Held.UNMARKED, "a slot without any mark was claimed"
    refusal = ownership.fresh_start_refusal(conn, name, A)
    assert f"COMMENT ON PUBLICATION \"{name}\" IS '{ownership.OLD_MARK}'" in refusal, refusal
    conn.execute(sql.SQL("COMMENT ON PUBLICATION {} IS {}").format(sql.Identifier(name), ownership.OLD_MARK))
    behind = {"lsn": end["lsn"] - 1}
    assert source.position_gone(A, 0, "source[0]", behind, 5.0) is None
    assert ownership.owner(conn, name).held is ownership.Held.OLD, "a checkpoint behind the slot marked it"
    assert ownership.fresh_start_refusal(conn, name, A) is not None
    assert source.position_gone(A, 0, "source[0]", end, 5.0) is None
    assert ownership.owner(conn, name) == ownership.Owner(ownership.Held.RUN, A)
    assert ownership.fresh_start_refusal(conn, name, A) is None
