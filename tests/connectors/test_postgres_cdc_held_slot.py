"""A replication slot another connection holds (``pg_replication_slots.active_pid``) when the stream
starts on it. A slot serves one connection at a time, and the server refuses a second with
"replication slot ... is active for PID n" (55006). The holder may be this job's own earlier driver,
whose walsender goes once the server notices the dead connection: the start waits for it, saying
whom it waits for. Or it is someone else (``pg_recvlogical``, another job given the same slot.name),
which never lets go by itself: past ``slot.active-timeout.ms`` the attempt fails naming the slot, the
holder and the way out, instead of waiting and retrying without a word."""

from __future__ import annotations

import glob
import logging
import os
import subprocess
import threading
import time

import pytest
from psycopg import sql

from seatide.connectors.postgres_cdc import holder, ownership, replication, slot
from seatide.plugin.base import PERMANENT_MARK
from tests.connectors.test_postgres_cdc import (Replica, cdc_source, reader_for, shop, start,  # noqa: F401
                                                wait_until)


def _holder_pid(conn, name: str) -> int | None:
    row = conn.execute("SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s", (name,)).fetchone()
    return row[0] if row else None


@pytest.fixture
def recvlogical(private_postgres):
    """Starts ``pg_recvlogical`` streaming a slot (a foreign holder): ``hold(conn, db, name)`` ->
    (process, its walsender's PID), the walsender called ``app_name``; ``made``: the slot and
    publication are made first, as SeaTide makes them, marked as run ``made``'s (True: with the mark
    of a SeaTide before marks named a run); a slot that is not SeaTide's is never dropped
    (test_postgres_cdc_held_slot_review)."""
    started: list[subprocess.Popen] = []

    def hold(conn, db: str, name: str, made: bool | str = False,
             app_name: str = "pg_recvlogical") -> tuple[subprocess.Popen, int]:
        if made:
            conn.execute(f"CREATE PUBLICATION {name} FOR TABLE items")
            if made is True:
                conn.execute(sql.SQL("COMMENT ON PUBLICATION {} IS {}").format(sql.Identifier(name), ownership.OLD_MARK))
            else:
                ownership.mark(conn, name, made)
            conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))
        binary = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_recvlogical"))[-1]
        process = subprocess.Popen(
            [binary, "-h", "127.0.0.1", "-p", str(private_postgres.port), "-U", "postgres", "-d", db,
             "-S", name, "--start", "--no-loop", "-f", os.devnull,
             "-o", "proto_version=1", "-o", f"publication_names={name}"],
            env={**os.environ, "PGAPPNAME": app_name}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        started.append(process)
        wait_until(lambda: _holder_pid(conn, name) is not None and process.poll() is None, what="pg_recvlogical")
        return process, _holder_pid(conn, name)

    yield hold
    for process in started:
        process.terminate()
        process.wait(timeout=10)


def _ended_query(spark, source, job: str, checkpoint: str) -> tuple[str, float]:
    """Start the query and wait for it to end: (its error, seconds it ran)."""
    began = time.monotonic()
    query = start(spark, source, job, checkpoint, Replica())
    try:
        wait_until(lambda: not query.isActive, timeout=120, what="the query to end")
        return str(query.exception()), time.monotonic() - began
    finally:
        query.stop()


def _names_the_foreign_holder(error: str, name: str, pid: int) -> None:
    assert f"replication slot '{name}'" in error and f"PID {pid}" in error, error
    assert "application_name 'pg_recvlogical'" in error and "client 127.0.0.1:" in error, error
    assert "connected since" in error and f"pg_terminate_backend({pid})" in error, error


def test_a_slot_held_by_a_foreign_process_fails_the_start_naming_the_holder(spark, shop, tmp_path, recvlogical):  # noqa: F811
    conn, url, db = shop
    name = slot.default_name("held", 0, "source[0]")
    source = cdc_source(url, f"{db}.public.items", 'startup.mode = "latest"\nslot.active-timeout.ms = 3000')
    checkpoint = str(tmp_path / "cp")
    query = start(spark, source, "held", checkpoint, Replica())
    try:
        # the first batch committed, not just the slot made: a query stopped before that leaves a
        # checkpoint Spark refuses to start from (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY)
        wait_until(lambda: os.path.exists(os.path.join(checkpoint, "commits", "0")), query,
                   what="the first committed batch")
    finally:
        query.stop()
    wait_until(lambda: _holder_pid(conn, name) is None, what="the stopped query to let the slot go")
    foreign, pid = recvlogical(conn, db, name)
    error, took = _ended_query(spark, source, "held", checkpoint)
    assert PERMANENT_MARK in error, error
    _names_the_foreign_holder(error, name, pid)
    assert "slot.name" in error, error
    assert took < 40, f"the start waited {took:.0f} s (slot.active-timeout.ms = 3000)"
    assert foreign.poll() is None             # the holder was named, never ended by SeaTide


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_the_jobs_own_earlier_holder_is_waited_for_by_name_then_ends_the_attempt_retryably(shop):  # noqa: F811
    conn, url, db = shop
    reader = reader_for(cdc_source(url, f"{db}.public.items", 'startup.mode = "latest"'), "own")
    begun = reader.latestOffset(reader.initialOffset())
    config = {**reader.config, "job_id": "own"}
    # an earlier driver of this job, whose walsender has not gone yet
    earlier = replication._start(config, reader.slot, begun["lsn"])
    pid = _holder_pid(conn, reader.slot)
    try:
        with pytest.raises(replication.ReplicationError) as caught:
            next(replication.stream({**config, "active_timeout_ms": 1000}, reader.slot, begun["lsn"]))
        error = str(caught.value)
        assert PERMANENT_MARK not in error            # it goes by itself: a new attempt may find it gone
        assert f"replication slot '{reader.slot}'" in error and f"PID {pid}" in error, error
        own = holder.application_name({"job_id": "own"})
        assert "an earlier driver of this job" in error and f"application_name '{own}'" in error, error

        records = _Records()
        logging.getLogger("seatide.connectors.postgres_cdc").addHandler(records)
        got: list = []

        def first_message():
            messages = replication.stream({**config, "active_timeout_ms": 60_000}, reader.slot, begun["lsn"])
            got.append(next(messages))
            messages.close()

        streaming = threading.Thread(target=first_message, daemon=True)
        try:
            streaming.start()
            wait_until(lambda: any(f"PID {pid}" in m and "an earlier driver of this job" in m
                                   for m in records.messages), what="the wait naming the holder")
            earlier.close()                           # the dead driver's connection is noticed
            conn.execute("INSERT INTO items (id) VALUES (900)")
            wait_until(lambda: got, what="the stream to start once the holder is gone")
        finally:
            logging.getLogger("seatide.connectors.postgres_cdc").removeHandler(records)
            streaming.join(timeout=30)
    finally:
        earlier.close()
        reader.stop()


def test_a_fresh_start_on_a_slot_name_another_process_streams_fails_naming_it(spark, shop, tmp_path, recvlogical):  # noqa: F811
    """A fresh start replaces whatever has its slot's name; a slot.name another process streams
    cannot be replaced, and that process is named (not an endless wait on a drop)."""
    conn, url, db = shop
    name = "shared_by_name"
    _, pid = recvlogical(conn, db, name, made="fresh")       # the job's own slot (another job's is refused at once)
    source = cdc_source(url, f"{db}.public.items", f'slot.name = "{name}"\nslot.active-timeout.ms = 3000')
    error, took = _ended_query(spark, source, "fresh", str(tmp_path / "cp"))
    assert PERMANENT_MARK in error, error
    _names_the_foreign_holder(error, name, pid)
    assert took < 40, f"the start waited {took:.0f} s (slot.active-timeout.ms = 3000)"
    assert _holder_pid(conn, name) == pid          # its slot left as it was


def test_a_release_on_a_held_slot_names_the_holder_and_is_tried_again(shop, recvlogical):  # noqa: F811
    """The leader's release leaves a slot another process streams (ObjectInUse, an outage it tries
    again: plugin/server_errors.py), and says who holds it."""
    from psycopg import errors

    from seatide.plugin.server_errors import passing

    conn, url, db = shop
    name = "released_while_held"
    _, pid = recvlogical(conn, db, name, made="rel")         # the run's own (an old-marked one is left: review rev3)
    source = cdc_source(url, f"{db}.public.items", f'slot.name = "{name}"')
    with pytest.raises(errors.ObjectInUse) as caught:
        source.release("rel", within_s=1.5)
    assert passing(caught.value)
    _names_the_foreign_holder(str(caught.value), name, pid)
    assert _holder_pid(conn, name) == pid
