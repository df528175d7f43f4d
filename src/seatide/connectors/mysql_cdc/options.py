"""MySQL-CDC's options: SeaTunnel's names and defaults. Options that tune Debezium's or
Flink CDC's own machinery are accepted so jobs load unchanged; their docs say so."""

from __future__ import annotations

from seatide.connectors.cdc_tuning import SNAPSHOT_TUNING
from seatide.connectors.cdc_evolution import SCHEMA_CHANGE_OPTIONS
from seatide.connectors.cdc_tables import PATTERN_OPTION
from seatide.plugin.options import BOOL, INT, LIST, OBJECT, REQUIRED, STRING, STRING_LIST, Option, enum

STARTUP_MODES = enum("initial", "earliest", "latest", "specific")
STOP_MODES = enum("never", "latest", "specific")
FORMATS = enum("DEFAULT", "COMPATIBLE_DEBEZIUM_JSON")
# SeaTunnel's default server-id is random in this range (it must differ from every server's).
SERVER_ID_RANGE = (6500, 2_148_492_146)

MYSQL_CDC_OPTIONS: tuple[Option, ...] = (
    Option("base-url", STRING, REQUIRED,
           "JDBC URL of the server: jdbc:mysql://host:3306/db or jdbc:mariadb://host:3306/db"),
    Option("username", STRING, REQUIRED,
           "user with SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE and REPLICATION CLIENT"),
    Option("password", STRING, REQUIRED, "the user's password"),
    Option("database-names", STRING_LIST, None,
           "databases to capture; when given, every table in table-names must be in one of them"),
    Option("table-names", STRING_LIST, REQUIRED,
           "tables to capture as database.table; several tables must have the same columns"),
    PATTERN_OPTION,
    Option("table-names-config", LIST, None,
           "per-table settings: [{ table = \"db.t\", primaryKeys = [\"id\"] }] gives the key of a "
           "table that has no primary key (used to split its snapshot)"),
    Option("startup.mode", STARTUP_MODES, "initial",
           "initial: snapshot the tables, then stream changes from the position taken before the "
           "snapshot; earliest: stream from the oldest binlog on the server; latest: stream from "
           "now on; specific: stream from startup.specific-offset.file/pos"),
    Option("startup.specific-offset.file", STRING, None, "binlog file to start from (startup.mode = specific)"),
    Option("startup.specific-offset.pos", INT, None, "position in that file (startup.mode = specific)"),
    Option("stop.mode", STOP_MODES, "never", "only never: a CDC stream runs until it is cancelled"),
    Option("stop.specific-offset.file", STRING, None, "not supported (stop.mode = specific is refused)"),
    Option("stop.specific-offset.pos", INT, None, "not supported (stop.mode = specific is refused)"),
    Option("snapshot.split.size", INT, 8096,
           "rows per snapshot split: a table's snapshot is read as key ranges of about this many "
           "rows, in parallel Spark tasks"),
    Option("snapshot.fetch.size", INT, 1024, "rows fetched from the server per round trip while reading a split"),
    Option("server-id", STRING, None,
           "the replica id this reader registers with (5400), or a range (5400-5408) whose first id "
           "is used; must differ from every server's and other reader's id; default random in "
           f"{SERVER_ID_RANGE[0]}..{SERVER_ID_RANGE[1]}"),
    Option("server-time-zone", STRING, "UTC",
           "the time zone TIMESTAMP columns are shown in (an IANA name such as Europe/Berlin or UTC)"),
    Option("connect.timeout.ms", INT, 30000, "how long to wait for a connection to the server"),
    Option("connect.max-retries", INT, 3, "how often to retry a failed connection before failing"),
    *SNAPSHOT_TUNING,
    Option("exactly_once", BOOL, False,
           "accepted; a replayed micro-batch re-reads the same binlog range, and SeaTide's sinks "
           "commit each batch once, whatever this says"),
    Option("format", FORMATS, "DEFAULT", "DEFAULT only: rows with a __row_kind"),
    Option("debezium", OBJECT, None,
           "Debezium properties; SeaTide does not run Debezium, so they are ignored, except "
           "include.schema.changes: true means schema.change.behavior = evolve, false ignore"),
    *SCHEMA_CHANGE_OPTIONS,
)
