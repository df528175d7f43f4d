"""Outside review (rev2) of 8348a57..aa6b0a4: slot.name ownership. Each test states a promise and
FAILS on aa6b0a4 where the promise is broken (F3b adjusted: see its docstring). Real slots on the private
PostgreSQL; no Spark."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from seatide.connectors.postgres_cdc import ownership, slot
from tests.connectors.test_postgres_cdc import cdc_source, read_rows, shop  # noqa: F401
from tests.connectors.test_postgres_cdc_held_slot_review import _reader
from tests.connectors.test_postgres_cdc_slot_owner import _started

A, A_LATER, B = "job-a.0123456789ab", "job-a.aaaaaaaaaaaa", "job-b.ba9876543210"


def test_f1_an_earlier_runs_release_drops_the_live_later_runs_slot_when_keep_misses_it(shop):  # noqa: F811
    """Job a's run r1 made slot.name S; job a was submitted again (run r2), whose fresh start re-marked S as
    r2's and reads through it. r1's history expiry / pending release runs with ``keep`` empty (the name is built
    from pieces, "${prefix}_slot": _claimed_elsewhere cannot see it; docs/operations.md). The mark names r2,
    not r1, so r1's release must leave S. On aa6b0a4 it drops it: r2 loses its slot and position."""
    conn, url, db = shop
    name = "rev2_later_run"
    r1, _ = _started(conn, url, db, A, name)
    r1.stop()
    r2 = _reader(url, db, A_LATER, name)                      # the later run's fresh start: mark now names r2
    start = r2.latestOffset(r2.initialOffset())
    conn.execute("INSERT INTO items (id) VALUES (6000)")
    end = r2.latestOffset(start)
    assert [r["id"] for r in read_rows(r2, start, end)] == [6000]
    r2.commit(end)
    r2.stop()                                                 # idle between batches
    assert ownership.owner(conn, name) == ownership.Owner(ownership.Held.RUN, A_LATER)
    before = slot.state(conn, name)
    cdc_source(url, f"{db}.public.items", f'slot.name = "{name}"').release(A, keep=frozenset(), within_s=1.5)
    assert slot.state(conn, name) == before, "run r1's release dropped the slot its job's live run r2 made and reads"


def test_f2_another_jobs_fresh_start_drops_a_running_pre_upgrade_jobs_slot(shop):  # noqa: F811
    """Job a, started by the SeaTide before this change, reads slot.name S (publication with OLD_MARK) and keeps
    running after the upgrade (its resume never re-marks). Job b, a copy-paste with the same slot.name, starts
    afresh. The promise: never drop a slot another SeaTide job still reads. On aa6b0a4 b's start is not refused
    (OLD is 'free for anyone'), drops a's slot and recreates it as b's; a's unread change is gone."""
    conn, url, db = shop
    before, refused = refused_on_an_old_mark(shop, "rev2_old_mark", 5001)
    assert "rev2_old_mark" in refused
    assert slot.state(conn, "rev2_old_mark") == before, "job b's fresh start dropped and recreated job a's slot"


def refused_on_an_old_mark(shop, name: str, unread: int) -> tuple:
    """Job a's slot ``name`` with the mark of a SeaTide before marks named a run, row ``unread`` not read by a
    yet; job b's fresh start on it, refused: (the slot's state before b, b's refusal)."""
    conn, url, db = shop
    a, _ = _started(conn, url, db, A, name)
    a.stop()
    conn.execute(sql.SQL("COMMENT ON PUBLICATION {} IS {}").format(sql.Identifier(name), ownership.OLD_MARK))
    conn.execute("INSERT INTO items (id) VALUES (%s)", (unread,))
    before = slot.state(conn, name)
    b = _reader(url, db, B, name)
    try:
        with pytest.raises(Exception) as refused:
            b.latestOffset(b.initialOffset())
    finally:
        b.stop()
    return before, str(refused.value)


def test_f3a_a_slot_made_before_marks_existed_is_left_by_its_own_release_which_reports_success(shop):  # noqa: F811
    """A slot.name slot made by SeaTide before 08e5997 (no COMMENT on its publication). Its own job's release
    returns normally (the step records RELEASED, source_holds go, the slot is unwatched) while the slot stays,
    retaining WAL; only a leader log line says so. Promise: no slot SeaTide made is left retaining WAL forever
    without a visible reason."""
    conn, url, db = shop
    name = "rev2_pre_mark_release"
    a, _ = _started(conn, url, db, A, name)
    a.stop()
    conn.execute(sql.SQL("COMMENT ON PUBLICATION {} IS NULL").format(sql.Identifier(name)))   # as 08e5997^ made it
    released = True
    try:
        cdc_source(url, f"{db}.public.items", f'slot.name = "{name}"').release(A, within_s=1.5)
    except Exception:   # noqa: BLE001 - a failed release is retried and shown: acceptable
        released = False
    assert not (released and slot.state(conn, name) is not None), \
        "its own release reported success and left the slot retaining WAL"


def test_f3b_a_slot_made_before_marks_existed_is_its_jobs_once_its_checkpoint_resumed_through_it(shop):  # noqa: F811
    """The same slot: its own job's fresh start (resume --fallback fresh, the documented way on after a lost
    position) was refused for good as 'not made by SeaTide'. Promise: a job's own resume is never refused on its
    own slot, including one made by an earlier SeaTide.

    Adjusted from the review's test (which asked the fresh start's refusal right away): a publication without a
    comment is what a SeaTide before 08e5997 made and what another consumer makes alike, and a fresh start sees no
    checkpoint, so the slot is told the job's by its checkpoint: the job's resume, whose checkpoint has read
    through the slot, marks it as the run's; until then a fresh start is refused, saying so. Since review rev3 a
    resume never marks a publication without any mark (a lagging consumer's passes the checkpoint test too): the
    refusal says how the user tells it is SeaTide's (COMMENT ... IS the old mark), and the resume then marks it."""
    conn, url, db = shop
    name = "rev2_pre_mark_fresh"
    a, end = _started(conn, url, db, A, name)
    a.stop()
    conn.execute(sql.SQL("COMMENT ON PUBLICATION {} IS NULL").format(sql.Identifier(name)))
    why = ownership.fresh_start_refusal(conn, name, A)
    told = f"COMMENT ON PUBLICATION \"{name}\" IS '{ownership.OLD_MARK}'"
    assert why is not None and told in why and "resume the job from its checkpoint once" in why, why
    conn.execute(told)                                        # the user, as the refusal says
    resumed = _reader(url, db, A, name)                       # the job's resume after the upgrade
    try:
        conn.execute("INSERT INTO items (id) VALUES (5003)")
        later = resumed.latestOffset(end)
        assert [r["id"] for r in read_rows(resumed, end, later)] == [5003]
    finally:
        resumed.stop()
    assert ownership.owner(conn, name) == ownership.Owner(ownership.Held.RUN, A)
    assert ownership.fresh_start_refusal(conn, name, A) is None, "its own job's fresh start is refused"
    assert "belongs to SeaTide job 'job-a'" in ownership.fresh_start_refusal(conn, name, B)


def test_f4_a_fresh_start_cut_between_create_publication_and_its_mark_is_refused_for_good_on_the_retry(shop, monkeypatch):  # noqa: F811,E501
    """CREATE PUBLICATION and COMMENT ON PUBLICATION run in two autocommit transactions. An attempt that dies
    between them (driver killed, connection cut) leaves an unmarked publication and no slot: the next attempt of
    the very same run is refused for good ('not made by SeaTide'). Promise: a job's own new attempt is never
    refused."""
    conn, url, db = shop
    name = "rev2_cut_mark"
    real = ownership.mark
    calls = []

    def cut(c, n, run):
        calls.append(run)
        if len(calls) == 1:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        real(c, n, run)

    monkeypatch.setattr(ownership, "mark", cut)
    first = _reader(url, db, A, name)
    try:
        with pytest.raises(psycopg.OperationalError):
            first.latestOffset(first.initialOffset())
    finally:
        first.stop()
    again = _reader(url, db, A, name)                         # the same run's next attempt
    try:
        again.latestOffset(again.initialOffset())
    finally:
        again.stop()
    assert ownership.owner(conn, name) == ownership.Owner(ownership.Held.RUN, A)


def test_f5_two_jobs_first_starts_at_once_the_later_drops_the_earlier_jobs_new_slot(shop, monkeypatch):  # noqa: F811
    """Two jobs with the same slot.name start at about the same time. b's check (FREE) and its drop are not one
    step: a makes its publication (marked a's) and slot in between, and b's drop (which, for a held slot, even
    waits up to slot.active-timeout.ms for it to come free) then drops a's slot. Promise: never drop another
    SeaTide job's slot."""
    conn, url, db = shop
    name = "rev2_race"
    real = ownership.owner
    state = {}

    def owner_then_a_starts(c, n):
        found = real(c, n)
        if not state:
            state["a"] = _reader(url, db, A, name)
            state["a"].latestOffset(state["a"].initialOffset())       # a's fresh start lands right after b's check
            state["before"] = slot.state(conn, name)
        return found

    monkeypatch.setattr(ownership, "owner", owner_then_a_starts)
    b = _reader(url, db, B, name)
    try:
        try:
            b.latestOffset(b.initialOffset())
        except Exception:   # noqa: BLE001 - b refused: what the promise asks
            pass
    finally:
        b.stop()
        state["a"].stop()
    assert ownership.Owner(ownership.Held.RUN, A) == real(conn, name), "b replaced a's slot and publication"


def test_f6_a_resume_that_changes_slot_name_orphans_the_runs_earlier_slot(shop):  # noqa: F811
    """Run A's pipeline 1 read through its default-named slot; a resume with --fallback fresh gave the source a
    slot.name (or renamed it: changed_sources lets --fallback fresh start it afresh, not left out). The run's
    release reads only the current config: with slot.name set it drops that one name, never the run's default
    name (nor an earlier slot.name), so the earlier slot, which SeaTide made for this run, stays retaining WAL
    forever, unwatched (source_watch reads the current config too), no event."""
    conn, url, db = shop
    earlier = slot.default_name(A, 1, "source[0]")
    r = _reader(url, db, A, earlier)                          # the earlier incarnation's slot, made by SeaTide
    r.config["slot_given"] = False
    r.latestOffset(r.initialOffset())
    r.stop()
    assert slot.state(conn, earlier) is not None
    now = cdc_source(url, f"{db}.public.items", 'slot.name = "rev2_renamed"')
    now.release(A, within_s=1.5)                              # the run ends for good: its release
    assert slot.state(conn, earlier) is None, f"the run's earlier slot {earlier} was left by its release"


def test_f7_another_jobs_slot_in_another_database_is_called_not_seatides(shop, private_postgres):  # noqa: F811
    """Slots are per server, publications per database. Job a reads slot.name S in one database; job b (a
    copy-paste pointed at another database of the same server) is refused - safely - but told the slot was
    'not made by SeaTide ... another consumer (pg_recvlogical, Debezium...)', not that job a holds it: the
    error names the wrong owner and a wrong fix ('if nothing reads the slot any more, drop it')."""
    conn, url, db = shop
    name = "rev2_cross_db"
    a, _ = _started(conn, url, db, A, name)
    a.stop()
    other = db + "_b"
    with private_postgres.connect() as admin:
        admin.execute(f"CREATE DATABASE {other}")
    with private_postgres.connect(other) as conn_b:
        why = ownership.fresh_start_refusal(conn_b, name, B)
    assert why is not None
    assert "job 'job-a'" in why, why


def test_f6_a_resume_that_renames_slot_name_leaves_no_slot_of_the_run_behind(shop):  # noqa: F811
    """The same with an earlier slot.name: the run read through slot.name S1, a resume renamed it S2; the run's
    release drops S1 too (its publication is marked as this run's), and never another run's slot."""
    conn, url, db = shop
    first, _ = _started(conn, url, db, A, "rev2_renamed_from")
    first.stop()
    other = _reader(url, db, B, "rev2_renamed_other")         # another job's slot.name, made and marked as its
    try:
        other.latestOffset(other.initialOffset())
    finally:
        other.stop()
    cdc_source(url, f"{db}.public.items", 'slot.name = "rev2_renamed_to"').release(A, within_s=1.5)
    assert slot.state(conn, "rev2_renamed_from") is None, "the run's earlier slot.name was left by its release"
    assert slot.state(conn, "rev2_renamed_other") is not None, "another job's slot was dropped"
