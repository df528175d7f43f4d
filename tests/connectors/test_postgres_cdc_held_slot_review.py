"""A slot that is not this job's is never dropped, moved or read past: from the review of the held-slot
change (0dfb7e2..d24f05d), whose scenarios failed on d24f05d (a foreign slot dropped, a change
skipped without a word, another job taken for this one's driver, another job's slot released)."""

from __future__ import annotations

import glob
import os
import subprocess

import pytest

from seatide.connectors.postgres_cdc import holder, replication, slot
from seatide.connectors.postgres_cdc.pgoutput import format_lsn
from seatide.plugin.base import PERMANENT_MARK
from tests.connectors.test_postgres_cdc import Replica, cdc_source, read_rows, reader_for, shop, wait_until  # noqa: F401
from tests.connectors.test_postgres_cdc_held_slot import _holder_pid, recvlogical  # noqa: F401


def _foreign_slot(conn, name: str) -> str:
    """A slot and publication another consumer made and reads (e.g. Debezium, pg_recvlogical), with
    one change it has not consumed yet; returns the slot's confirmed position."""
    conn.execute(f"CREATE PUBLICATION {name} FOR TABLE items")
    conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))
    conn.execute("INSERT INTO items (id) VALUES (7001)")          # pending for the foreign consumer
    return conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                        (name,)).fetchone()[0]


def _pending(conn, name: str) -> int:
    return len(slot.peek(conn, name))


def test_a_fresh_start_refuses_an_idle_foreign_slot_given_as_slot_name_and_leaves_it(shop):  # noqa: F811
    """slot.name names another consumer's slot, idle right now (its consumer between reconnects:
    pg_recvlogical without --no-loop reconnects every 5 s). A fresh start refuses for good, naming
    it, and leaves it and its consumer's unread change (was: dropped and recreated)."""
    conn, url, db = shop
    name = "foreign_idle"
    before = _foreign_slot(conn, name)
    assert _pending(conn, name) > 0
    reader = reader_for(cdc_source(url, f"{db}.public.items", f'slot.name = "{name}"\nstartup.mode = "latest"'),
                        "fresh")
    reader.slot = reader.config["slot"] = name
    try:
        with pytest.raises(Exception) as caught:
            reader.latestOffset(reader.initialOffset())
    finally:
        reader.stop()
    error = str(caught.value)
    assert PERMANENT_MARK in error and f"replication slot '{name}' (slot.name) was not made by SeaTide" in error, error
    assert "give this source a slot.name of its own" in error.lower(), error
    after = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                         (name,)).fetchone()
    assert after is not None and after[0] == before, f"foreign slot replaced: {before} -> {after}"
    assert _pending(conn, name) > 0, "the foreign consumer's unread change is gone"


def test_a_release_leaves_an_idle_foreign_slot_given_as_slot_name(shop):  # noqa: F811
    """An idle foreign slot given as slot.name is left by the release (was: dropped, with its
    publication): only a slot whose publication carries SeaTide's mark is dropped. Its publication has
    no comment, as a SeaTide before marks left its own: the release is not passed as done (review rev2,
    F3), saying how to settle it; once the publication says it is another's, the release leaves it."""
    from seatide.connectors.postgres_cdc.ownership import NotReleased

    conn, url, db = shop
    name = "foreign_released"
    _foreign_slot(conn, name)
    source = cdc_source(url, f"{db}.public.items", f'slot.name = "{name}"')
    with pytest.raises(NotReleased) as caught:
        source.release("rel", within_s=1.5)
    assert f"COMMENT ON PUBLICATION \"{name}\" IS 'not SeaTide''s'" in str(caught.value), caught.value
    assert f"pg_drop_replication_slot('{name}')" in str(caught.value), caught.value
    assert slot.state(conn, name) is not None, "another consumer's slot was dropped by SeaTide's release"
    conn.execute(f"COMMENT ON PUBLICATION \"{name}\" IS 'not SeaTide''s'")
    source.release("rel", within_s=1.5)
    assert slot.state(conn, name) is not None, "another consumer's slot was dropped by SeaTide's release"


def test_another_job_whose_id_shares_51_characters_is_not_taken_for_this_jobs_own_driver(shop, recvlogical):  # noqa: F811
    """Job ids may be 64 characters (store/job_ids.py); the application_name ends in a hash of the
    whole run key, so two jobs sharing their first 51 characters are told apart: the other job's stream
    is a foreign holder, failing the start for good (was: taken for this job's own earlier driver)."""
    conn, url, db = shop
    stem = "nightly-orders-replication-eu-west-1-production-ab"      # 50 characters
    mine, other = stem + "X-1", stem + "X-2"
    assert holder.application_name({"job_id": mine}) != holder.application_name({"job_id": other})
    assert all(len(holder.application_name({"job_id": j})) <= 63 for j in (mine, other, "x" * 64))
    name = "shared_stem"
    _, pid = recvlogical(conn, db, name, made=True, app_name=holder.application_name({"job_id": other}))
    reader = reader_for(cdc_source(url, f"{db}.public.items", 'startup.mode = "latest"'), "stem")
    config = {**reader.config, "job_id": mine, "active_timeout_ms": 1000}
    try:
        with pytest.raises(Exception) as caught:
            next(replication.stream(config, name, slot.state(conn, name).confirmed_lsn))
    finally:
        reader.stop()
    error = str(caught.value)
    assert f"PID {pid}" in error, error
    assert "earlier driver of this job" not in error, error
    assert PERMANENT_MARK in error, error


def _reader(url: str, db: str, job: str, name: str):
    reader = reader_for(cdc_source(url, f"{db}.public.items", f'slot.name = "{name}"\nstartup.mode = "latest"'), job)
    reader.slot = reader.config["slot"] = name
    reader.config["job_id"] = job
    return reader


def _fails_for_good_naming_the_move(reader, end: dict, name: str) -> None:
    """The job's next batch, whose start the slot has confirmed past, fails for good and says so."""
    with pytest.raises(Exception) as caught:
        reader.latestOffset(end)
    error = str(caught.value)
    assert PERMANENT_MARK in error, error
    assert f"slot '{name}'" in error and "has already moved on to LSN" in error, error
    assert format_lsn(end["lsn"]) in error, error
    assert "another job given the same slot.name" in error and "slot.name of its own" in error, error


def test_another_jobs_fresh_start_on_the_same_slot_name_is_refused_and_the_running_job_reads_on(shop):  # noqa: F811
    """Between a running job's batches its slot is idle; another job given the same slot.name (a copy-paste)
    starts afresh. Its start is refused for good, naming the job that holds the slot and both ways out, and
    the running job's slot and position are untouched: its next batch reads every change (was: the slot
    dropped and recreated, the running job's unread changes lost, and it failed naming the move)."""
    conn, url, db = shop
    name = "shared_between_batches"
    a = _reader(url, db, "job-a.0123456789ab", name)
    b = _reader(url, db, "job-b.ba9876543210", name)
    try:
        start = a.latestOffset(a.initialOffset())
        conn.execute("INSERT INTO items (id) VALUES (8000)")
        end = a.latestOffset(start)
        assert [r["id"] for r in read_rows(a, start, end)] == [8000], "job a's first batch"
        a.commit(end)
        conn.execute("INSERT INTO items (id) VALUES (8001)")          # job a has not read this yet
        before = slot.state(conn, name)
        with pytest.raises(Exception) as caught:
            b.latestOffset(b.initialOffset())                          # job b's fresh start, a between batches
        error = str(caught.value)
        assert PERMANENT_MARK in error and "cannot start this job afresh" in error, error
        assert f"replication slot '{name}' (slot.name) belongs to SeaTide job 'job-a' (run 0123456789ab)" in error, error
        assert "Give this source a slot.name of its own" in error and "if job 'job-a' no longer runs" in error, error
        assert f"SELECT pg_drop_replication_slot('{name}'); DROP PUBLICATION IF EXISTS \"{name}\"" in error, error
        assert slot.state(conn, name) == before, "job b's refused start moved job a's slot"
        conn.execute("INSERT INTO items (id) VALUES (8002)")
        later = a.latestOffset(end)
        assert [r["id"] for r in read_rows(a, end, later)] == [8001, 8002], "job a lost a change"
    finally:
        a.stop()
        b.stop()


def test_a_jobs_release_leaves_the_slot_of_a_job_whose_id_extends_its_own(shop):  # noqa: F811
    """Job 'orders' releases only the names its rule gives it, not every 'seatide_orders_%': job
    'orders-1's idle slot (seatide_orders_1_0_source0) is left."""
    conn, url, db = shop
    theirs = slot.default_name("orders-1", 0, "source[0]")
    conn.execute(f"CREATE PUBLICATION {theirs} FOR TABLE items")
    conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (theirs,))
    cdc_source(url, f"{db}.public.items").release("orders", within_s=1.5)
    assert slot.state(conn, theirs) is not None, f"job 'orders' released job 'orders-1's slot {theirs}"


def test_a_jobs_names_are_matched_exactly_also_when_cut_to_fit():
    """Its own names, short and cut (hashed), are the job's; those of a job whose id extends it are not."""
    long_id = "a-job-id-long-enough-that-its-slot-names-are-cut-to-fit-63-chars"
    assert slot.is_of_job(slot.default_name("orders", 2, "source[1]"), "orders")
    assert not slot.is_of_job(slot.default_name("orders-1", 0, "source[0]"), "orders")
    assert not slot.is_of_job(slot.default_name("orders", 0, "source[0]"), "orders-1")
    cut = slot.default_name(long_id, 3, "source[2]")
    assert len(cut) == 63 and slot.is_of_job(cut, long_id)
    assert not slot.is_of_job(slot.default_name(long_id + "x", 3, "source[2]"), long_id)


def test_a_foreign_holder_that_confirmed_past_the_position_fails_the_job_naming_it(  # noqa: F811
        shop, private_postgres):
    """pg_recvlogical held the slot briefly and confirmed what it read, past the job's checkpoint:
    the job's next batch fails for good naming the move (was: the change it consumed skipped without
    an error, the position being checked once per reader), and so does a stream started there."""
    conn, url, db = shop
    name = "borrowed_briefly"
    a = _reader(url, db, "job-a", name)
    holder_process = None
    try:
        start = a.latestOffset(a.initialOffset())
        conn.execute("INSERT INTO items (id) VALUES (9000)")
        end = a.latestOffset(start)
        read_rows(a, start, end)
        a.commit(end)
        conn.execute("INSERT INTO items (id) VALUES (9001)")          # the job has not read this yet
        confirmed = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                                 (name,)).fetchone()[0]
        binary = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_recvlogical"))[-1]
        holder_process = subprocess.Popen(
            [binary, "-h", "127.0.0.1", "-p", str(private_postgres.port), "-U", "postgres", "-d", db,
             "-S", name, "--start", "--no-loop", "-s", "1", "-F", "1", "-f", os.devnull,
             "-o", "proto_version=1", "-o", f"publication_names={name}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_until(lambda: conn.execute("SELECT confirmed_flush_lsn > %s::pg_lsn FROM pg_replication_slots "
                                         "WHERE slot_name = %s", (confirmed, name)).fetchone()[0],
                   what="the foreign holder to confirm what it read")
        holder_process.terminate()                                     # it lets go, well within the bound
        holder_process.wait(timeout=10)
        wait_until(lambda: _holder_pid(conn, name) is None, what="the slot free")
        conn.execute("INSERT INTO items (id) VALUES (9002)")
        _fails_for_good_naming_the_move(a, end, name)
        with pytest.raises(Exception, match="has already moved on"):    # the task's stream checks too
            next(replication.stream(a.config, name, end["lsn"]))
    finally:
        if holder_process is not None and holder_process.poll() is None:
            holder_process.terminate()
            holder_process.wait(timeout=10)
        a.stop()
