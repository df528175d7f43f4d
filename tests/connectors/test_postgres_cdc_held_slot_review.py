"""Review of the held-slot change (0dfb7e2..d24f05d): scenarios where its promises break.

Each test asserts what the promise says; they FAIL on d24f05d, demonstrating the finding."""

from __future__ import annotations

import glob
import os
import subprocess

import pytest

from seatide.connectors.postgres_cdc import holder, replication, slot
from seatide.connectors.postgres_cdc.pgoutput import format_lsn
from seatide.plugin.base import PERMANENT_MARK
from tests.connectors.test_postgres_cdc import Replica, cdc_source, read_rows, reader_for, shop, wait_until  # noqa: F401
from tests.connectors.test_postgres_cdc_held_slot import _holder_pid


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


def test_review_a_fresh_start_drops_a_foreign_slot_that_is_idle_at_that_moment(shop):  # noqa: F811
    """slot.name names another consumer's slot, idle right now (its consumer between reconnects:
    pg_recvlogical without --no-loop reconnects every 5 s). The change refuses only an *active*
    holder; an idle foreign slot is dropped and recreated, and its consumer's unread change is gone."""
    conn, url, db = shop
    name = "foreign_idle"
    before = _foreign_slot(conn, name)
    assert _pending(conn, name) > 0
    reader = reader_for(cdc_source(url, f"{db}.public.items", f'slot.name = "{name}"\nstartup.mode = "latest"'),
                        "fresh")
    reader.slot = reader.config["slot"] = name
    try:
        reader.latestOffset(reader.initialOffset())
    except Exception as exc:         # a refusal naming the slot would keep the promise
        assert "slot" in str(exc)
    finally:
        reader.stop()
    after = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                         (name,)).fetchone()
    assert after is not None and after[0] == before, f"foreign slot replaced: {before} -> {after}"
    assert _pending(conn, name) > 0, "the foreign consumer's unread change is gone"


def test_review_release_drops_a_foreign_slot_given_as_slot_name_when_idle(shop):  # noqa: F811
    """The leader's release names an active foreign holder (the change), but an idle foreign slot
    given as slot.name is dropped, with its publication."""
    conn, url, db = shop
    name = "foreign_released"
    _foreign_slot(conn, name)
    cdc_source(url, f"{db}.public.items", f'slot.name = "{name}"').release("rel", within_s=1.5)
    assert slot.state(conn, name) is not None, "another consumer's slot was dropped by SeaTide's release"


@pytest.fixture
def named_recvlogical(private_postgres):
    started: list[subprocess.Popen] = []

    def hold(conn, db: str, name: str, app_name: str) -> int:
        conn.execute(f"CREATE PUBLICATION {name} FOR TABLE items")
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))
        binary = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_recvlogical"))[-1]
        process = subprocess.Popen(
            [binary, "-h", "127.0.0.1", "-p", str(private_postgres.port), "-U", "postgres", "-d", db,
             "-S", name, "--start", "--no-loop", "-f", os.devnull,
             "-o", "proto_version=1", "-o", f"publication_names={name}"],
            env={**os.environ, "PGAPPNAME": app_name}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        started.append(process)
        wait_until(lambda: _holder_pid(conn, name) is not None, what="pg_recvlogical")
        return _holder_pid(conn, name)

    yield hold
    for process in started:
        process.terminate()
        process.wait(timeout=10)


def test_review_another_job_whose_id_shares_51_characters_is_taken_for_this_jobs_own_driver(shop, named_recvlogical):  # noqa: F811
    """Job ids may be 64 characters (store/job_ids.py); 'seatide job ' + id is cut at 63, so two jobs
    sharing their first 51 characters carry one application_name. The other job's live stream (or any
    client that sets that application_name) is then 'an earlier driver of this job': a lasting
    foreign holder ends each attempt as retryable, every attempt waiting the full bound, and the
    error tells the operator it will go by itself."""
    conn, url, db = shop
    stem = "nightly-orders-replication-eu-west-1-production-ab"      # 50 characters
    mine, other = stem + "X-1", stem + "X-2"
    assert holder.application_name({"job_id": mine}) != holder.application_name({"job_id": other})
    assert all(len(holder.application_name({"job_id": j})) <= 63 for j in (mine, other, "x" * 64))
    name = "shared_stem"
    pid = named_recvlogical(conn, db, name, holder.application_name({"job_id": other}))
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


def test_review_another_job_with_the_same_slot_name_starting_between_batches_makes_a_running_job_skip_changes(shop):  # noqa: F811
    """Docs (this change): 'another job given the same slot.name ... fails the job'. That holds only
    while the running job is mid-read: between its batches its slot is idle, the second job's fresh
    start drops and recreates it, and the running job's next batch starts at the new slot's later
    position: the change made in between is skipped, without an error."""
    conn, url, db = shop
    name = "shared_between_batches"
    a = _reader(url, db, "job-a", name)
    b = _reader(url, db, "job-b", name)
    try:
        start = a.latestOffset(a.initialOffset())
        conn.execute("INSERT INTO items (id) VALUES (8000)")
        end = a.latestOffset(start)
        assert [r for r in read_rows(a, start, end)], "job a's first batch"
        a.commit(end)
        conn.execute("INSERT INTO items (id) VALUES (8001)")          # job a has not read this yet
        try:
            b.latestOffset(b.initialOffset())                          # job b's fresh start, a between batches
        except Exception as exc:
            assert "slot" in str(exc)                                  # refusing b would keep the promise
        conn.execute("INSERT INTO items (id) VALUES (8002)")
        _fails_for_good_naming_the_move(a, end, name)
    finally:
        a.stop()
        b.stop()


def test_review_a_jobs_release_drops_the_idle_slot_of_a_job_whose_id_extends_its_own(shop):  # noqa: F811
    """release(job) drops every slot named 'seatide_<job>_%'. Job 'orders' releases job 'orders-1's
    slot (seatide_orders_1_0_source0): while held the change names it 'another SeaTide job' and keeps
    it, but idle between that job's batches it is dropped."""
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


def test_review_a_foreign_holder_that_lets_go_within_the_bound_has_moved_the_slot_and_the_job_skips_silently(  # noqa: F811
        shop, private_postgres):
    """The change waits for a foreign holder and, once it lets go within slot.active-timeout.ms,
    streams on as if nothing happened. But pg_recvlogical (any logical client) confirms what it read:
    the slot's position moved past the job's checkpoint, and the job's next batch starts there. The
    change it consumed is skipped without an error (the position is checked once per reader)."""
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
