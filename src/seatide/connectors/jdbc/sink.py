"""Jdbc sink: SeaTunnel's JDBC sink for PostgreSQL, MySQL and MariaDB, exactly once per micro-batch.

Spark's executors append each micro-batch to a staging table next to the target; the
driver then applies the staged rows to the target and records the batch's transaction id
in ``seatide_sink_commits``, in one database transaction (see targets.py: the sink on the one
sink protocol, a target per target table). No XA, and no
primary key needed: a replayed batch finds its record and writes nothing.
"""

from __future__ import annotations

from seatide.connectors.jdbc.query import QueryError, parse_insert
from seatide.connectors.jdbc.spec import JdbcSinkSpec
from seatide.connectors.jdbc.step_statement import NotUnderLock, locked_statement
from seatide.connectors.jdbc.url import POSTGRESQL, JdbcUrl, JdbcUrlError
from seatide.plugin.base import Lacking, Sink, SinkContext
from seatide.plugin.options import BOOL, INT, OBJECT, REQUIRED, STRING, STRING_LIST, Option, enum
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ALL_KINDS, INSERT_ONLY
from seatide.plugin.sink_protocol import SinkTargets
from seatide.plugin.tables import TableRoute

SCHEMA_SAVE_MODES = ("RECREATE_SCHEMA", "CREATE_SCHEMA_WHEN_NOT_EXIST", "ERROR_WHEN_SCHEMA_NOT_EXIST", "IGNORE")
DATA_SAVE_MODES = ("DROP_DATA", "APPEND_DATA", "CUSTOM_PROCESSING", "ERROR_WHEN_DATA_EXISTS")
_COMPAT = "accepted for compatibility; "


@register
class JdbcSink(Sink):
    """Writes rows into a PostgreSQL, MySQL or MariaDB table, each micro-batch in one transaction."""

    plugin_name = "Jdbc"
    row_kind_hint = ("set primary_keys so updates and deletes can be applied by key, or put "
                     "FilterRowKind { exclude_kinds = [...] } or RowKindExtractor {} before it")
    options = (
        Option("url", STRING, REQUIRED, "JDBC URL: jdbc:postgresql://host:5432/db, jdbc:mysql://host:3306/db "
               "or jdbc:mariadb://host:3306/db"),
        Option("driver", STRING, None, "JDBC driver class Spark's executors load (default: "
               "org.postgresql.Driver / org.mariadb.jdbc.Driver by the URL)"),
        Option("user", STRING, None, "database user"),
        Option("password", STRING, None, "database password"),
        Option("query", STRING, None, "INSERT INTO t (a, b) VALUES (?, ?): one ? per input field, in order; "
               "run as one INSERT ... SELECT over the staged batch (table is used when both are given)"),
        Option("compatible_mode", STRING, None, _COMPAT + "the dialect follows the URL"),
        Option("database", STRING, None, "database to write into (default: the URL's)"),
        Option("table", STRING, None, "target table; schema.table on PostgreSQL (default: the input table's "
               "name, ${table_name}, when the input has a catalog)"),
        Option("schema", STRING, None, "PostgreSQL: the target table's schema, in place of the one table names "
               "(SeaTunnel's catalog option, which its multi-table jobs use)"),
        Option("tablePrefix", STRING, None, "put in front of the target table's name (SeaTunnel's catalog option)"),
        Option("tableSuffix", STRING, None, "put after the target table's name (SeaTunnel's catalog option)"),
        Option("generate_sink_sql", BOOL, False, _COMPAT + "SeaTide generates the statements whenever table is given"),
        Option("primary_keys", STRING_LIST, None, "key fields: updates and deletes are applied by them"),
        Option("enable_upsert", BOOL, True, "with primary_keys: INSERT and UPDATE_AFTER upsert; false: INSERT "
               "inserts (a duplicate key fails the batch) and UPDATE_AFTER updates"),
        Option("support_upsert_by_query_primary_key_exist", BOOL, False,
               _COMPAT + "both dialects have a native upsert, which SeaTide always uses"),
        Option("batch_size", INT, 1000, "rows per JDBC batch when Spark's executors stage a batch"),
        Option("connection_check_timeout_sec", INT, 30, "seconds to wait when the driver connects"),
        Option("max_retries", INT, 0, _COMPAT + "a failed batch is retried whole by the runtime"),
        Option("is_exactly_once", BOOL, False, _COMPAT + "SeaTide is always exactly once, without XA"),
        Option("xa_data_source_class_name", STRING, None, _COMPAT + "XA is not used"),
        Option("max_commit_attempts", INT, 3, _COMPAT + "a failed commit fails the batch, which is replayed"),
        Option("transaction_timeout_sec", INT, -1, _COMPAT + "a batch's transaction lasts as long as it needs"),
        Option("auto_commit", BOOL, True, _COMPAT + "every batch is committed as one transaction"),
        Option("field_ide", enum("ORIGINAL", "UPPERCASE", "LOWERCASE"), "ORIGINAL",
               "write field names as they are, in upper or in lower case"),
        Option("properties", OBJECT, None, "extra JDBC connection properties for Spark's executors"),
        Option("schema_save_mode", enum(*SCHEMA_SAVE_MODES), "CREATE_SCHEMA_WHEN_NOT_EXIST",
               "before the first batch: RECREATE_SCHEMA drops and creates the table from the input; "
               "CREATE_SCHEMA_WHEN_NOT_EXIST creates it when missing; ERROR_WHEN_SCHEMA_NOT_EXIST fails "
               "when it is missing; IGNORE does nothing"),
        Option("data_save_mode", enum(*DATA_SAVE_MODES), "APPEND_DATA",
               "before the first batch: DROP_DATA empties the table; APPEND_DATA keeps its rows; "
               "CUSTOM_PROCESSING runs custom_sql; ERROR_WHEN_DATA_EXISTS fails when it has rows"),
        Option("custom_sql", STRING, None, "with data_save_mode CUSTOM_PROCESSING: SQL run before the first batch"),
        Option("use_copy_statement", BOOL, False, _COMPAT + "batches are staged with batched INSERTs"),
        Option("create_index", BOOL, True, "give a table created from the input its primary key (primary_keys)"),
    )

    def __init__(self, opts, parallelism: int = 1, env=None):
        super().__init__(opts, parallelism, env)
        # Keys let every change be applied; without them only inserts have a meaning.
        self.accepted_row_kinds = ALL_KINDS if self.keys and self.table else INSERT_ONLY

    @property
    def keeps_last_change_per_key(self) -> bool:
        return bool(self.keys and self.table)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self.opts["primary_keys"] or ())

    def change_keys(self) -> "tuple[str, tuple[str, ...]] | None":
        return ("primary_keys", self.keys) if self.keys and self.table else None

    def check(self) -> None:
        opts = self.opts
        try:
            self.url = JdbcUrl.parse(opts["url"])
        except JdbcUrlError as exc:
            raise self.invalid("url", f"option 'url': {exc}") from None
        self.table = self._table()
        self.query = None
        if self.table is None:
            if not opts["query"]:
                raise self.invalid("table", "give table (with database, optionally primary_keys) or query "
                                   "(INSERT INTO t (a, b) VALUES (?, ?)) to say where rows go")
            try:
                self.query = parse_insert(opts["query"])
            except QueryError as exc:
                raise self.invalid("query", f"option 'query': {exc}") from None
        if opts["data_save_mode"] == "CUSTOM_PROCESSING" and not (opts["custom_sql"] or "").strip():
            raise self.invalid("custom_sql", "data_save_mode is CUSTOM_PROCESSING but custom_sql is empty: "
                               "give the SQL to run before the first batch")
        self._check_locked_custom_sql()
        if opts["batch_size"] < 1:
            raise self.invalid("batch_size", "option 'batch_size' must be 1 or more rows")
        if self.keys and self.table and opts["enable_upsert"] and not opts["create_index"] \
                and opts["schema_save_mode"] == "RECREATE_SCHEMA":
            raise self.invalid("create_index", "create_index = false leaves the recreated table without the "
                               "primary key that upserts by primary_keys need; keep create_index or set "
                               "enable_upsert = false")

    def _check_locked_custom_sql(self) -> None:
        """MySQL/MariaDB run a DDL custom_sql under LOCK TABLES on the target, after the decision is
        recorded: one that cannot run there is refused now, not by the server then (outside review, R-D)."""
        opts = self.opts
        if self.table is None or self.url.dialect == POSTGRESQL or opts["data_save_mode"] != "CUSTOM_PROCESSING" \
                or opts["schema_save_mode"] == "RECREATE_SCHEMA":       # RECREATE_SCHEMA's DROP runs instead
            return
        spec = self.spec()
        if not spec.custom_sql_is_ddl:
            return
        table = spec.placed()[1]
        try:     # a single-table sink connects to its 'database' option's database (``JdbcTargets.open_target``)
            locked_statement(spec.custom_sql, table, spec.database)
        except NotUnderLock as exc:
            label = ".".join(table)
            raise self.invalid("custom_sql", f"option 'custom_sql': {spec.custom_sql.strip()!r} cannot run as "
                               f"data_save_mode CUSTOM_PROCESSING on MySQL/MariaDB: {exc}. A custom_sql that is "
                               f"not plain DML commits at once, so SeaTide runs it with table {label} locked (LOCK "
                               f"TABLES {label} WRITE) while it checks that no pipeline keeps rows there; use one "
                               f"statement on {label} alone (TRUNCATE TABLE, ALTER TABLE, DROP TABLE, CREATE or DROP "
                               "INDEX ... ON it), a DML statement (DELETE FROM ...), or run this one before the "
                               "job") from None

    def _table(self) -> tuple[str, ...] | None:
        text = (self.opts["table"] or "").strip()
        if not text:
            return None
        if "${" in text:   # sink placeholders are filled by now (plan.catalog); this one is not one
            raise self.invalid("table", f"option 'table': {text!r} holds a ${{...}} that is not a sink "
                               "placeholder (${database_name}, ${schema_name}, ${table_name}, ...) "
                               "nor a job variable; name the table, or pass the variable with -i")
        parts = tuple(p.strip().strip('"`') for p in text.split("."))
        if len(parts) > 2 or not all(parts):
            raise self.invalid("table", f"option 'table': {text!r} must be name or schema.name")
        # SeaTunnel's naming options for multi-table jobs: the schema replaced, the name wrapped
        name = f"{self.opts['tablePrefix'] or ''}{parts[-1]}{self.opts['tableSuffix'] or ''}"
        schema = self.opts["schema"] or (parts[0] if len(parts) == 2 else None)
        if self.opts["schema"] and self.url.dialect != POSTGRESQL:
            raise self.invalid("schema", "option 'schema' names a PostgreSQL schema; on MySQL/MariaDB write "
                               "the database in 'database'")
        return (schema, name) if schema else (name,)

    @classmethod
    def table_defaults(cls, body: dict, table, multi_table: bool) -> dict:
        """SeaTunnel's defaults from the input table (its JdbcSinkFactory): no ``table`` means the
        input table's name; on a multi-table input, no ``primary_keys`` means the table's primary
        key (else its first unique key), and on MySQL/MariaDB no ``database`` means the input
        table's database (PostgreSQL keeps the URL's: a database there is another connection)."""
        from seatide.plugin.options import OptionError

        if table is None or not table.table:
            return body
        body = dict(body)
        if multi_table and body.get("table") is None and body.get("query") is not None:
            raise OptionError("query", "option 'query' writes one table, and this sink receives several; "
                              "remove query and name the targets with table (default ${table_name})")
        if body.get("table") is None and body.get("query") is None:
            body["table"] = "${table_name}"
        if not multi_table:
            return body
        if body.get("primary_keys") is None:
            if table.primary_key is not None:
                body["primary_keys"] = list(table.primary_key.columns)
            else:
                unique = next((k for k in table.constraint_keys if k.kind == "UNIQUE_KEY"), None)
                if unique is not None:
                    body["primary_keys"] = [c for c, _ in unique.columns]
        if body.get("database") is None:
            try:
                url = JdbcUrl.parse(str(body.get("url", "")))
            except JdbcUrlError:
                return body        # check() reports the URL
            if url.dialect != POSTGRESQL:
                body["database"] = "${database_name" + (f":{url.database}}}" if url.database else "}")
        return body

    def open_targets(self, ctx: SinkContext | None, routes: list[TableRoute], multi: bool) -> SinkTargets:
        from seatide.connectors.jdbc.targets import JdbcTargets      # Spark's types: only where a job runs

        return JdbcTargets(ctx, routes, multi)

    def spec(self) -> JdbcSinkSpec:
        opts = self.opts
        return JdbcSinkSpec(
            url=self.url, driver=self.url.driver_class(opts["driver"]), user=opts["user"],
            password=opts["password"], database=opts["database"] or self.url.database, properties={k: str(v) for k, v in (opts["properties"] or {}).items()},
            table=self.table, query=self.query, primary_keys=self.keys if self.table else (),
            enable_upsert=opts["enable_upsert"], batch_size=opts["batch_size"],
            schema_save_mode=opts["schema_save_mode"], data_save_mode=opts["data_save_mode"],
            custom_sql=opts["custom_sql"], create_index=opts["create_index"], field_ide=opts["field_ide"],
            connect_timeout=opts["connection_check_timeout_sec"])

    def lacking(self, schema_changes: str | None) -> list[Lacking]:
        """The privileges the job needs that its user lacks, asked of the server (privileges.py)."""
        from seatide.connectors.jdbc.privileges import lacking

        found: dict[str, tuple[Lacking, list[str]]] = {}
        for spec in [route.sink.spec() for route in self.routes] if self.routes else [self.spec()]:
            database, table = spec.placed()
            conn = spec.url.connect(spec.user, spec.password, database=database, connect_timeout=spec.connect_timeout)
            try:
                for one in lacking(conn, spec, table, schema_changes, database if self.routes else spec.database,
                                   bool(self.routes)):
                    found.setdefault(one.privilege, (one, []))[1].append(".".join(table) if table else "query")
            finally:
                conn.close()
        return [Lacking(one.privilege, f"{one.why} (on {', '.join(dict.fromkeys(tables))})", one.required)
                for one, tables in found.values()]
