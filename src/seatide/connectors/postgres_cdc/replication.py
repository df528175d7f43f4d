"""The slot's changes streamed over a replication connection, from any position on.

``START_REPLICATION SLOT s LOGICAL <lsn>`` sends every transaction whose commit record
starts at or after ``lsn`` (and after the slot's confirmed position), one pgoutput message
per CopyData, decoding as it goes. So a batch reads from its own start, however far the
slot lags behind, and stops when it has what it needs: the work per batch is its own
changes, not the whole backlog as with the SQL peek (which always starts at the slot's
confirmed position and materialises everything up to its limit on the server).

psycopg 3 speaks the replication protocol through its low-level ``pgconn`` (simple query
protocol, CopyBoth). We never confirm a position on this connection: status updates carry
zero positions, which the server takes as "alive" without moving the slot; the slot moves
only by ``slot.advance`` after Spark's commit. A slot serves one connection at a time, so
opening a stream waits while another connection holds it, naming the holder, up to
``slot.active-timeout.ms`` (``holder``).
"""

from __future__ import annotations

import select
import struct
import time
from typing import Iterator

from seatide.connectors.postgres_cdc import holder, slot
from seatide.connectors.postgres_cdc.pgoutput import format_lsn, parse_lsn
from seatide.plugin.base import permanent_in_worker

# Status updates keep a long read alive (the server drops a silent client after wal_sender_timeout).
_STATUS_EVERY_S = 10.0
_OBJECT_IN_USE = "55006"
# Microseconds between the Unix epoch and PostgreSQL's (2000-01-01)
_PG_EPOCH_US = 946_684_800_000_000
# Tries on a held slot: soon at first (the last batch's stream lets go at once), then calmer
_FIRST_TRY_AGAIN_S, _MOST_TRY_AGAIN_S = 0.02, 0.5


class ReplicationError(RuntimeError):
    """The server refused or ended the replication stream."""


def session_settings(config: dict) -> dict[str, str]:
    """How every session of the source prints values: the walsender prints the stream's with the
    replication connection's settings, and a key looked up by its text (unchanged.py) must be
    printed alike there and on the lookup connection; money must be in the form the reader parses
    (pg_types.money_text_to_plain), whatever lc_monetary the server or database defaults to."""
    return {"TimeZone": config["time_zone"], "DateStyle": "ISO, YMD", "lc_monetary": "C",
            "bytea_output": "hex", "extra_float_digits": "3"}


def connect_replication(config: dict):
    import psycopg

    # Set at connection start (a replication connection runs no SET before START_REPLICATION).
    options = " ".join(f"-c {name}={value.replace(' ', chr(92) + ' ')}"
                       for name, value in session_settings(config).items())
    return psycopg.connect(host=config["host"], port=config["port"], dbname=config["database"],
                           user=config["user"], password=config["password"] or None,
                           connect_timeout=max(1, config["connect_timeout_ms"] // 1000),
                           application_name=holder.application_name(config),
                           autocommit=True, replication="database", options=options)


def create_slot(conn, name: str, export_snapshot: bool, temporary: bool = False) -> tuple[int, str | None]:
    """Create a pgoutput slot on a replication connection: (consistent point, exported snapshot).

    The snapshot (``export_snapshot``) shows the tables exactly as of the consistent point (every
    transaction whose commit record starts before it, none after) and lives while ``conn`` stays
    open and runs nothing else. A ``temporary`` slot is dropped by the server when ``conn`` closes
    (a newly added table's snapshot point: ``stream.PostgresCdcReader._begin_backfill``)."""
    option = "(SNAPSHOT 'export')" if export_snapshot else "(SNAPSHOT 'nothing')"
    kind = "TEMPORARY LOGICAL" if temporary else "LOGICAL"
    result = _exec(conn, f'CREATE_REPLICATION_SLOT "{name}" {kind} pgoutput {option}')
    return parse_lsn(result.get_value(0, 1).decode()), (result.get_value(0, 2) or b"").decode() or None


def _exec(conn, command: str):
    from psycopg import pq

    result = conn.pgconn.exec_(command.encode())
    if result.status not in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK):
        raise ReplicationError(f"{command}: {(result.error_message or b'').decode().strip()}")
    return result


def stream(config: dict, slot_name: str, start_lsn: int) -> Iterator[tuple[str, object]]:
    """The slot's messages from ``start_lsn`` on: ``("data", pgoutput bytes)`` and, whenever the
    server says how far it has read the WAL (``walend``), ``("walend", lsn)``. Runs until the
    caller stops iterating; the connection is closed then."""
    conn = _start(config, slot_name, start_lsn)
    pgconn = conn.pgconn
    last_status = time.monotonic()
    try:
        while True:
            size, data = pgconn.get_copy_data(1)
            if size == 0:
                if time.monotonic() - last_status > _STATUS_EVERY_S:
                    _send_status(pgconn)
                    last_status = time.monotonic()
                select.select([pgconn.socket], [], [], 1.0)
                pgconn.consume_input()
                continue
            if size < 0:
                result = pgconn.get_result()
                message = (result.error_message or b"").decode().strip() if result is not None else ""
                raise ReplicationError(f"the server ended the replication stream of slot '{slot_name}'"
                                       + (f": {message}" if message else ""))
            data = bytes(data)
            if data[:1] == b"w":
                yield "data", data[25:]
            elif data[:1] == b"k":
                wal_end, _when, reply = struct.unpack(">qqb", data[1:18])
                yield "walend", wal_end
                if reply:
                    _send_status(pgconn)
                    last_status = time.monotonic()
    finally:
        conn.close()


def _start(config: dict, slot_name: str, start_lsn: int):
    """A replication connection streaming the slot; waits while another connection holds it."""
    from psycopg import pq

    publication = slot_name.replace("'", "''")
    command = (f'START_REPLICATION SLOT "{slot_name}" LOGICAL {format_lsn(start_lsn)} '
               f"(proto_version '1', publication_names '\"{publication}\"')").encode()
    waiting, pause = holder.Wait.of(config, slot_name), _FIRST_TRY_AGAIN_S
    while True:
        conn = connect_replication(config)
        pgconn = conn.pgconn
        try:
            _check_not_past(conn, slot_name, start_lsn)
        except Exception:
            conn.close()
            raise
        pgconn.send_query(command)
        result = None
        while True:     # the first result is COPY_BOTH, or the error
            pgconn.consume_input()
            if not pgconn.is_busy():
                result = pgconn.get_result()
                break
            select.select([pgconn.socket], [], [], 1.0)
        if result is not None and result.status == pq.ExecStatus.COPY_BOTH:
            pgconn.nonblocking = 1
            return conn
        state = result.error_field(pq.DiagnosticField.SQLSTATE) if result is not None else None
        message = (result.error_message or b"").decode().strip() if result is not None else "no answer"
        try:
            held = holder.find(pgconn, slot_name) if state == _OBJECT_IN_USE.encode() else None
        finally:
            conn.close()
        if state == _OBJECT_IN_USE.encode():
            ended = waiting.held(held)
            if ended is None:
                time.sleep(pause)
                pause = min(_MOST_TRY_AGAIN_S, pause * 2)
                continue
            text, lasting = ended
            raise permanent_in_worker(text) if lasting else ReplicationError(text)
        raise ReplicationError(f"START_REPLICATION of slot '{slot_name}' at {format_lsn(start_lsn)}: {message}")


def _check_not_past(conn, slot_name: str, start_lsn: int) -> None:
    """Fail for good when the slot confirmed past ``start_lsn``: the server would start there and
    skip the changes in between without a word (right at the start, as the driver's check of the
    batch may be a while ago: the slot is idle between streams)."""
    confirmed = _exec(conn, "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '"
                      + slot_name.replace("'", "''") + "'")
    value = confirmed.get_value(0, 0) if confirmed.ntuples else None
    if value is not None and parse_lsn(value.decode()) > start_lsn:
        raise permanent_in_worker(slot.lost_position_message(
            slot_name, start_lsn, slot.moved_on(slot_name, parse_lsn(value.decode()))))


def _send_status(pgconn) -> None:
    """A standby status update with no positions: alive, and confirming nothing."""
    now = int(time.time() * 1_000_000) - _PG_EPOCH_US
    pgconn.put_copy_data(b"r" + struct.pack(">qqqqb", 0, 0, 0, now, 0))
    pgconn.flush()
