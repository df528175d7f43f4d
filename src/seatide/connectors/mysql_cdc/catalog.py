"""What the server holds: connections, captured tables and their columns, binlog state.

Everything here runs wherever it is needed — the Spark driver (schema, start position) and
Spark's Python workers (snapshot splits, binlog reads) — from one ``ServerConfig`` that
travels to the workers as JSON in the data source's options.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from zoneinfo import ZoneInfo

import pymysql

from seatide import failpoints
from seatide.connectors import mysql_client
from seatide.connectors.mysql_cdc.binlog_values import raw_converter
from seatide.connectors.mysql_cdc.columns import Column, column
from seatide.connectors.mysql_cdc.ddl import column_default
from seatide.connectors.mysql_cdc.position import BinlogPosition

# Errors that a new connection may cure: can't connect, server gone away, lost connection.
_TRANSIENT = {2003, 2006, 2013}
_NO_SUCH_TABLE = 1146
_LOCK_WAIT_TIMEOUT = 1205


@dataclass(frozen=True)
class ServerConfig:
    host: str
    port: int
    user: str
    password: str
    tables: tuple[tuple[str, str], ...]            # (database, table)
    keys: dict = field(default_factory=dict)       # "db.table" -> [key columns] from table-names-config
    server_id: int = 0
    time_zone: str = "UTC"
    connect_timeout_s: float = 30.0
    max_retries: int = 3
    split_size: int = 8096
    fetch_size: int = 1024
    # The description's metadata lock: how long one attempt waits for it, and how many are made
    # (catalog.described_at). The server's own wait is a day (MariaDB) or a year (MySQL).
    describe_lock_wait_s: int = 5
    describe_lock_attempts: int = 3

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "ServerConfig":
        data = json.loads(text)
        data["tables"] = tuple(tuple(t) for t in data["tables"])
        return cls(**data)

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.time_zone)

    def connect(self, **extra) -> pymysql.Connection:
        """A connection, retried ``max_retries`` times when the server cannot be reached."""
        for attempt in range(self.max_retries + 1):
            try:
                return mysql_client.connect(host=self.host, port=self.port, user=self.user,
                                            password=self.password, autocommit=True, charset="utf8mb4",
                                            connect_timeout=max(1, int(self.connect_timeout_s)), **extra)
            except pymysql.err.OperationalError as exc:
                if exc.args[0] not in _TRANSIENT or attempt == self.max_retries:
                    raise
                time.sleep(min(2.0, 0.2 * 2 ** attempt))
        raise AssertionError("unreachable")

    @property
    def replication_settings(self) -> dict:
        return {"host": self.host, "port": self.port, "user": self.user, "password": self.password,
                "connect_timeout": max(1, int(self.connect_timeout_s))}


@dataclass(frozen=True)
class CapturedTable:
    database: str
    table: str
    described: tuple[tuple, ...]  # information_schema rows: name, DATA_TYPE, COLUMN_TYPE, precision, scale
    key: tuple[str, ...]          # primary key (or table-names-config's); empty: none
    time_zone: str = "UTC"
    charsets: tuple = ()          # each column's CHARACTER_SET_NAME (None: not a character column)
    # Columns dropped or renamed since the job started (schema evolution), last in ``described``:
    # kept for rows from before the change, absent from the table itself.
    retired: tuple[str, ...] = ()
    # Schema evolution (ddl.py, shapes.py): each described column's id (kept across renames), and
    # the binlog position [file, pos] the shape is of: DDL statements up to it are in it already.
    ids: tuple = ()
    ddl_at: tuple | None = None
    # Each described column's (NOT NULL, default as ddl.column_default reads it): a sink that adds
    # the column gives it the same, and so the same values in the rows the server filled itself.
    definitions: tuple = ()

    @property
    def name(self) -> str:
        return f"{self.database}.{self.table}"

    @property
    def live(self) -> tuple[tuple, ...]:
        """``described`` without the retired columns: what the table has now."""
        return tuple(row for row in self.described if row[0] not in self.retired)

    @cached_property
    def converters_by_name(self) -> dict:
        return {row[0]: convert for row, convert in zip(self.described, self.binlog_converters)}

    @cached_property
    def columns(self) -> tuple[Column, ...]:
        zone = ZoneInfo(self.time_zone)
        return tuple(column(*row, zone) for row in self.described)

    @cached_property
    def binlog_converters(self) -> tuple:
        """Per column: the binlog decoder's value -> the snapshot client's (``binlog_values``)."""
        charsets = self.charsets or (None,) * len(self.described)
        return tuple(raw_converter(row[1], charset, row[2]) for row, charset in zip(self.described, charsets))

    # The driver describes the tables once, when the job starts; workers get the
    # description with the data source's options, so every batch sees the same layout.
    def to_json(self) -> list:
        return [self.database, self.table, [list(r) for r in self.described], list(self.key), self.time_zone,
                list(self.charsets), list(self.retired), list(self.ids),
                list(self.ddl_at) if self.ddl_at is not None else None, [list(d) for d in self.definitions]]

    @classmethod
    def from_json(cls, data: list) -> "CapturedTable":
        database, table, described, key, zone, *rest = data
        charsets, retired, ids, ddl_at, definitions = [*rest, *[(), (), (), None, ()][len(rest):]]
        return cls(database, table, tuple(tuple(r) for r in described), tuple(key), zone, tuple(charsets),
                   tuple(retired), tuple(ids), tuple(ddl_at) if ddl_at is not None else None,
                   tuple(definition(d) for d in definitions))


def definition(kept) -> tuple:
    """A column's (NOT NULL, default) from its JSON form."""
    not_null, default = kept
    return bool(not_null), tuple(default) if default is not None else None


class CatalogError(Exception):
    """The server or a table is not usable for CDC; the message says how to fix it."""


def captured_table(conn, config: ServerConfig, database: str, table: str) -> CapturedTable:
    with conn.cursor() as cur:
        cur.execute("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, NUMERIC_PRECISION, NUMERIC_SCALE, "
                    "CHARACTER_SET_NAME, IS_NULLABLE, COLUMN_DEFAULT, EXTRA FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = %s "
                    "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (database, table))
        rows = cur.fetchall()
        if not rows:
            raise CatalogError(f"table {database}.{table} does not exist on {config.host}:{config.port} "
                               "(or the user may not see it): check table-names")
        cur.execute("SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = %s "
                    "AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION",
                    (database, table))
        primary = tuple(r[0] for r in cur.fetchall())
    described = tuple((r[0], r[1], r[2], None if r[3] is None else int(r[3]),
                       None if r[4] is None else int(r[4])) for r in rows)
    # MariaDB writes a string default in quotes, MySQL bare (an expression marked DEFAULT_GENERATED)
    mariadb = "mariadb" in str(conn.get_server_info()).lower()
    definitions = tuple((r[6] == "NO", column_default(r[7], mariadb or "DEFAULT_GENERATED" in str(r[8] or "")))
                        for r in rows)
    captured = CapturedTable(database, table, described, (), config.time_zone, tuple(r[5] for r in rows),
                             definitions=definitions)
    columns = captured.columns
    configured = tuple(config.keys.get(f"{database}.{table}", ()))
    names = {c.name for c in columns}
    missing = [k for k in configured if k not in names]
    if missing:
        raise CatalogError(f"table-names-config gives primaryKeys {list(configured)} for {database}.{table}, "
                           f"but it has no column {missing[0]} (columns: {', '.join(sorted(names))})")
    return replace(captured, key=primary or configured)


def described_at(conn, config: ServerConfig, database: str, table: str) -> tuple[CapturedTable, list | None]:
    """The table as described, and the binlog position ``[file, pos, server]`` its description is of.

    The table's metadata lock is held (a read in an open transaction) from before the description
    to after the position: a DDL statement of the table takes that lock exclusively and is logged
    before it lets go, so it is either done and logged before the position (and in the
    description) or waits and is logged after it (and not in it). A position taken before the
    description without the lock may come before a statement the description holds: read from
    there, the statement was applied twice, and the first snapshot failed for good."""
    failpoints.hit("mysql_cdc.describe_table")
    for attempt in range(1, config.describe_lock_attempts + 1):
        try:
            return _described_locked(conn, config, database, table)
        except pymysql.err.OperationalError as exc:
            # a DDL statement queued for the table (behind a transaction that holds it) queues our
            # lock too: let go, so as not to hold up the statement ourselves, and try again
            if exc.args[0] != _LOCK_WAIT_TIMEOUT or attempt == config.describe_lock_attempts:
                if exc.args[0] == _LOCK_WAIT_TIMEOUT:
                    raise CatalogError(_lock_blocked(conn, config, database, table)) from None
                raise
    raise AssertionError("unreachable")


def _described_locked(conn, config: ServerConfig, database: str, table: str) -> tuple[CapturedTable, list | None]:
    with conn.cursor() as cur:
        cur.execute("SET SESSION lock_wait_timeout = %s", (max(1, int(config.describe_lock_wait_s)),))
        cur.execute("START TRANSACTION")
        try:
            try:
                cur.execute(f"SELECT 1 FROM `{database.replace('`', '``')}`.`{table.replace('`', '``')}` LIMIT 0")
            except pymysql.err.ProgrammingError as exc:
                if exc.args[0] != _NO_SUCH_TABLE:   # described unlocked, a DDL statement could be in it twice
                    raise
                # no such table: captured_table says so, with the way out
            described = captured_table(conn, config, database, table)
            failpoints.hit("mysql_cdc.table_described")
            return described, shape_position(conn)
        finally:
            cur.execute("ROLLBACK")
            cur.execute("SET SESSION lock_wait_timeout = DEFAULT")


def _lock_blocked(conn, config: ServerConfig, database: str, table: str) -> str:
    """Why the description could not lock ``table``: the statements waiting for the table's metadata
    lock and the open transactions (one of which holds it), from the server's process list."""
    with conn.cursor() as cur:
        cur.execute("SELECT ID, USER, TIME, INFO FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() "
                    "AND STATE LIKE '%%metadata lock%%' ORDER BY TIME DESC LIMIT 3")
        waiting = [f"thread {i} ({u}, {t} s): {' '.join(str(q or '').split())[:200]}" for i, u, t, q in cur.fetchall()]
        try:
            cur.execute("SELECT trx_mysql_thread_id, trx_started, trx_query FROM information_schema.INNODB_TRX "
                        "WHERE trx_mysql_thread_id <> CONNECTION_ID() ORDER BY trx_started LIMIT 3")
            open_ = [f"thread {i} since {s}" + (f" ({' '.join(str(q).split())[:120]})" if q else "")
                     for i, s, q in cur.fetchall()]
        except pymysql.err.MySQLError:          # no InnoDB view for this user
            open_ = []
    waits = "; ".join(waiting) or "none seen now"
    holders = "; ".join(open_) or "none seen now"
    return (f"the table {database}.{table} could not be described: its metadata lock was not granted in "
            f"{config.describe_lock_attempts} tries of {config.describe_lock_wait_s} s on {config.host}:{config.port}. "
            f"Waiting for a table's metadata lock: {waits}. Open transactions, one of which holds the table: "
            f"{holders}. A DDL statement of the table waits for a transaction that has read it, and every "
            "reader queues behind the statement: end that transaction (COMMIT, ROLLBACK or KILL its thread) "
            "or the statement, then start the job again")


def shape_position(conn) -> list | None:
    """Where the binlog ends now, with the server's name (None: no binlog; the read says so)."""
    try:
        at = current_position(conn)
    except CatalogError:
        return None
    return [at.file, at.pos, server_identity(conn)]


def binlog_settings(conn) -> dict[str, str]:
    with conn.cursor() as cur:
        cur.execute("SHOW VARIABLES WHERE Variable_name IN ('log_bin', 'binlog_format', 'binlog_row_image')")
        return {name.lower(): str(value) for name, value in cur.fetchall()}


def check_binlog(conn, where: str) -> None:
    settings = binlog_settings(conn)
    wanted = {"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL"}
    wrong = [f"{k} = {settings.get(k, 'unset')}" for k, v in wanted.items() if settings.get(k, "").upper() != v]
    if wrong:
        raise CatalogError(f"MySQL-CDC needs the binary log on the server {where} with log_bin = ON, "
                           f"binlog_format = ROW and binlog_row_image = FULL, but it has {', '.join(wrong)}: "
                           "start the server with --log-bin --binlog-format=ROW --binlog-row-image=FULL")


def current_position(conn) -> BinlogPosition:
    """Where the binlog ends now: after the last committed transaction."""
    with conn.cursor() as cur:
        try:
            cur.execute("SHOW MASTER STATUS")
        except pymysql.err.ProgrammingError:     # MySQL 8.4 renamed it
            cur.execute("SHOW BINARY LOG STATUS")
        row = cur.fetchone()
    if not row:
        raise CatalogError("the server reports no binlog position: binary logging is off (start it with --log-bin)")
    return BinlogPosition.of(row[0], row[1])


def snapshot_position(conn) -> BinlogPosition:
    """Where the binlog stands for a read starting now: every transaction before it is visible
    to reads from now on, none after it.

    ``SHOW MASTER STATUS`` alone can name a position past a transaction whose binlog event is
    written but whose engine commit is not yet visible; a snapshot read then misses it and the
    stream starts after it: lost. MariaDB reports the position of a consistent snapshot
    (``binlog_snapshot_file/position``) and MySQL 8 one consistent with engine commits
    (``performance_schema.log_status``); other servers fall back to ``SHOW MASTER STATUS``."""
    with conn.cursor() as cur:
        try:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
            status = {str(k).lower(): v for k, v in cur.fetchall()}
            cur.execute("COMMIT")
            if status.get("binlog_snapshot_file"):
                return BinlogPosition.of(status["binlog_snapshot_file"], int(status["binlog_snapshot_position"]))
            cur.execute("SELECT LOCAL FROM performance_schema.log_status")
            row = cur.fetchone()
            local = json.loads(row[0]) if row and row[0] else None
        except (pymysql.err.MySQLError, TypeError, ValueError):
            local = None
    if local and local.get("binary_log_file"):
        return BinlogPosition.of(local["binary_log_file"], int(local["binary_log_position"]))
    return current_position(conn)


def server_identity(conn) -> str:
    """The server's own name: MySQL's server_uuid, else (MariaDB) its server_id."""
    with conn.cursor() as cur:
        try:
            cur.execute("SELECT @@server_uuid")
            uuid = cur.fetchone()[0]
        except pymysql.err.MySQLError:      # MariaDB has no server_uuid
            uuid = None
        if uuid:
            return str(uuid)
        cur.execute("SELECT @@server_id")
        return f"server_id:{cur.fetchone()[0]}"


def binlog_files(conn) -> list[str]:
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [r[0] for r in cur.fetchall()]
