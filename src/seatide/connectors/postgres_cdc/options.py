"""Postgres-CDC's options: SeaTunnel's names and defaults; what SeaTide does not do is refused here."""

from __future__ import annotations

from seatide.connectors.cdc_evolution import SCHEMA_CHANGE_OPTIONS
from seatide.connectors.cdc_tables import PATTERN_OPTION
from seatide.connectors.cdc_tuning import SNAPSHOT_TUNING
from seatide.connectors.postgres_cdc.holder import DEFAULT_TIMEOUT_MS
from seatide.connectors.postgres_cdc.values import INFINITY_HANDLING
from seatide.plugin.options import ANY, BOOL, INT, LIST, OBJECT, REQUIRED, STRING, STRING_LIST, Option, enum

STARTUP_MODE = enum("initial", "latest", "earliest", "specific", "timestamp")
INFINITY = enum(*INFINITY_HANDLING)

# Options SeaTunnel has that SeaTide accepts but refuses with a reason when set away from
# their defaults: key -> why.
UNSUPPORTED = {
    "debezium": "SeaTide decodes pgoutput itself; there is no Debezium engine to pass properties to "
                "(include.schema.changes is read: see schema.change.behavior)",
    "format": "only the DEFAULT row format is produced (COMPATIBLE_DEBEZIUM_JSON is not)",
}

PG_CDC_OPTIONS: tuple[Option, ...] = (
    Option("base-url", STRING, REQUIRED,
           "JDBC URL of the server, e.g. jdbc:postgresql://localhost:5432/shop"),
    Option("username", STRING, REQUIRED, "user to connect as; needs the REPLICATION attribute "
           "(or superuser) and the right to create publications on the captured tables"),
    Option("password", STRING, REQUIRED, "password of username (may be empty with trust auth)"),
    Option("database-names", STRING_LIST, None,
           "the database to capture (one: a replication slot belongs to one database); "
           "default: the database of table-names or base-url"),
    Option("schema-names", STRING_LIST, None,
           "schema for table names written without one (first entry); default public"),
    Option("table-names", STRING_LIST, REQUIRED,
           "tables to capture: database.schema.table (schema.table and table also work); any number, "
           "each of its own columns, read through one replication slot"),
    PATTERN_OPTION,
    Option("table-names-config", LIST, None,
           "per-table settings: [{ table = \"db.schema.t\", primaryKeys = [\"id\"] }] gives a key to "
           "a table (used to split its snapshot and to apply its changes by); it must lie among the columns "
           "the table's replica identity logs (any, under REPLICA IDENTITY FULL), or the job refuses it"),
    Option("startup.mode", STARTUP_MODE, "initial",
           "initial: snapshot the tables, then stream changes from the slot's start; "
           "latest: only changes made after the job starts. earliest/specific/timestamp: not supported"),
    Option("slot.name", STRING, None,
           "replication slot (and publication) name; default seatide_<job>_<pipeline>_<source> "
           "(see the docs page); must be unique per source on the server"),
    Option("slot.active-timeout.ms", INT, DEFAULT_TIMEOUT_MS,
           "how long starting to stream waits while another connection holds the slot (pg_replication_slots."
           "active_pid), naming the holder in the log; then a holder that is not this job's own earlier driver "
           "fails the job naming it and the fix (pg_terminate_backend, or another slot.name), and this job's "
           "own ends the attempt (retried)"),
    Option("decoding.plugin.name", STRING, "pgoutput",
           "logical decoding plugin; SeaTide always reads pgoutput (built into PostgreSQL 10+); any "
           "other value (decoderbufs, wal2json...) is accepted with a warning"),
    Option("snapshot.split.size", INT, 8096, "rows per snapshot split (split by the table's key)"),
    Option("snapshot.fetch.size", INT, 1024, "rows fetched per round trip while reading a snapshot split"),
    Option("server-time-zone", STRING, "UTC",
           "session time zone on the server; timestamptz values keep their instant whatever it is"),
    Option("infinity.handling", INFINITY, "fail",
           "what a date or timestamp of infinity or -infinity becomes, which Spark has no value for: fail "
           "(the job fails naming the table, column and value) or clamp (9999-12-31 23:59:59.999999 and "
           "0001-01-01 00:00:00, the last and first instants Spark holds; a target then holds those). "
           "Dates before Christ or after 9999 always fail"),
    Option("connect.timeout.ms", INT, 30000, "how long to wait for a connection to the server"),
    Option("connect.max-retries", INT, 3, "accepted; SeaTide's job retries cover reconnecting"),
    *SNAPSHOT_TUNING,
    *SCHEMA_CHANGE_OPTIONS,
    Option("exactly_once", BOOL, False,
           "accepted; changes are replayed from the slot until the batch's checkpoint commits, and "
           "exactly-once output is the sink's part"),
    Option("format", STRING, "DEFAULT", "DEFAULT only: rows with the table's columns and __row_kind"),
    Option("debezium", OBJECT, None, "not supported: " + UNSUPPORTED["debezium"]),
    Option("startup.specific-offset.file", STRING, None, "not supported (startup.mode specific)"),
    Option("startup.specific-offset.pos", ANY, None, "not supported (startup.mode specific)"),
    Option("startup.timestamp", INT, None, "not supported (startup.mode timestamp)"),
)
