"""One target table of the Jdbc sink: its save modes, its checks, its staging, its statements.

A Jdbc sink writes one table, or, on a multi-table input, one table per input table (each
from the sink built for that table, ``JdbcSinkSpec``). The writer (writer.py) holds the batch
protocol and the transaction; a ``JdbcTarget`` knows everything about one table: how the
input's fields are named in it, whether it exists and fits, how a batch is staged next to it
and applied to it.
"""

from __future__ import annotations

import logging
import uuid

from seatide import failpoints
from seatide.connectors.jdbc.commit_record import CommitRecords
from seatide.connectors.jdbc.dialect import STAGE_KIND, STAGE_SEQ, Dialect, UnsupportedType
from seatide.connectors.jdbc.named_lock import named_lock
from seatide.connectors.jdbc.query import QueryError
from seatide.connectors.jdbc.sink import JdbcSinkSpec
from seatide.connectors.jdbc.url import POSTGRESQL
from seatide.plugin.base import PermanentError
from seatide.plugin.evolution import ADD, DROP, RENAME, RETYPE, TableChange, live_fields
from seatide.plugin.rowkind import HIDDEN_COLUMNS, ROW_KIND_COLUMN, ROW_SEQ_COLUMN, RowKind

log = logging.getLogger(__name__)

# A writer waits this long for another writer of the sink that is making its save modes.
SAVE_MODES_WAIT_S = 60.0


class JdbcSinkError(PermanentError):
    """A table or field that contradicts the options; the message says what to change."""


class JdbcTarget:
    def __init__(self, spec: JdbcSinkSpec, dialect: Dialect, table: tuple[str, ...] | None, driver: str,
                 stage_prefix: str, source: str = "", key: str = ""):
        self.spec = spec
        self.dialect = dialect
        self.table = table                    # as qualified in the writer's connection; None: query mode
        self.driver = driver
        self.stage_prefix = stage_prefix
        self.source = source                  # the input table it receives (multi-table), for messages
        self.key = key                        # the route's key (names its save-mode record)
        self.stage_schema = table[:-1] if table else ()
        self.target_columns: dict[str, str] = {}    # lower-case name -> the target's spelling
        self.ready = False                    # checked against the database (save modes made)
        # Schema evolution (plugin/evolution.py): the source's behaviour, None when its tables do not
        # change; and renamed columns (new name -> old) whose older rows still carry the old name.
        self.behaviour: str | None = None
        self.renames: dict[str, str] = {}
        # MySQL: the staging tables' engine (dialect.STAGE_ENGINE) where the writer's Spark runs
        # each task once; None: the server's default
        self.stage_engine: str | None = None

    @property
    def label(self) -> str:
        return ".".join(self.table) if self.table else "query"

    @property
    def quoted(self) -> str:
        return self.dialect.qualified(self.table)

    # --- names -------------------------------------------------------------------------

    def rename(self, df):
        """Field names as written to the database: field_ide, then the target's own spelling. When
        the source's tables evolve, a renamed column takes the values rows from before the rename
        carry under the old name, and only the columns the target has are written."""
        renames = {name: self.column(name) for name in df.columns if name not in HIDDEN_COLUMNS}
        renames = {k: v for k, v in renames.items() if k != v}
        df = df.withColumnsRenamed(renames) if renames else df
        if self.behaviour is None or not self.target_columns:
            return df
        from pyspark.sql import functions as F

        for new, old in self.renames.items():
            if old in df.columns:
                merged = F.coalesce(F.col(_spark_name(new)), F.col(_spark_name(old))) if new in df.columns \
                    else F.col(_spark_name(old))
                df = df.withColumn(new, merged).drop(old)
        kept = set(self.target_columns.values()) | set(HIDDEN_COLUMNS)
        return df.select(*[F.col(_spark_name(c)) for c in df.columns if c in kept])

    def column(self, field: str) -> str:
        ide, known = self.spec.field_ide, self.target_columns
        name = field.upper() if ide == "UPPERCASE" else field.lower() if ide == "LOWERCASE" else field
        if known and name not in known.values():
            name = known.get(name.lower(), name)
        return name

    @property
    def keys(self) -> list[str]:
        """primary_keys as columns of the target (field_ide and the target's spelling applied)."""
        return [self.column(k) for k in self.spec.primary_keys]

    # --- before the first batch ----------------------------------------------------------

    def prepare(self, conn, schema, save_modes_key: str | None, records: CommitRecords, sink_id: str) -> None:
        """Make the save modes (once per run, when ``save_modes_key`` is given) and check that the
        table exists and fits ``schema`` (the input's fields, Spark's StructType)."""
        if self.table is None:
            self.ready = True
            return
        cursor = conn.cursor()
        if save_modes_key is not None:
            self._save_modes_once(conn, schema, save_modes_key, records, sink_id)
        dialect, label = self.dialect, self.label
        if not dialect.table_exists(cursor, self.table):
            raise JdbcSinkError(f"Jdbc sink: table {label} does not exist (schema_save_mode is "
                                f"{self.spec.schema_save_mode}); create it or use CREATE_SCHEMA_WHEN_NOT_EXIST")
        existing = dialect.columns(cursor, self.table)
        self.target_columns = {c.lower(): c for c in existing}
        fields = [self.column(f.name) for f in schema.fields if f.name not in HIDDEN_COLUMNS]
        missing = [c for c in fields if c not in existing]
        if missing and self.behaviour is None:
            raise JdbcSinkError(f"Jdbc sink: table {label} has no column {', '.join(missing)} "
                                f"(its columns: {', '.join(existing)}){self._for()}; add the columns or drop the fields")
        keys_missing = [k for k in self.keys if k not in fields]
        if keys_missing:
            raise JdbcSinkError(f"Jdbc sink: primary_keys names {', '.join(keys_missing)}, which the input "
                                f"does not have (fields: {', '.join(fields)}){self._for()}")
        # Without a matching unique index PostgreSQL refuses ON CONFLICT, and MySQL's ON DUPLICATE
        # KEY would quietly insert a second row for the key.
        if self.keys and self.spec.enable_upsert \
                and frozenset(self.keys) not in dialect.unique_keys(cursor, self.table):
            keys = ", ".join(self.keys)
            raise JdbcSinkError(f"Jdbc sink: table {label} has no primary key or unique index on "
                                f"({keys}), which upserts by primary_keys need; add one (ALTER TABLE ... ADD "
                                f"PRIMARY KEY ({keys})) or set enable_upsert = false")
        self.ready = True

    def _for(self) -> str:
        return f" (input table {self.source})" if self.source else ""

    def _save_modes_once(self, conn, schema, key: str, records: CommitRecords, sink_id: str) -> None:
        """The save modes, made once per run of the sink however many drivers run it.

        A zombie (a replaced driver that still runs) held before this step would otherwise
        empty or drop the table after its replacement committed into it. Under a lock both
        share in the target database, the first to come applies them and records ``key`` in
        ``seatide_sink_commits``; whoever comes after finds the record and does nothing."""
        failpoints.hit("sink.save_modes")
        cursor = conn.cursor()
        with named_lock(cursor, self.dialect.name, key, SAVE_MODES_WAIT_S):
            conn.rollback()        # a snapshot taken before the lock (MySQL) would not see the record
            if records.rows_of(cursor, key) is None:
                self._apply_save_modes(conn, schema)
                records.insert(cursor, key, sink_id, -1, 0)
            conn.commit()

    def _apply_save_modes(self, conn, schema) -> None:
        from pyspark.sql import types as T

        cursor = conn.cursor()
        spec, dialect, label = self.spec, self.dialect, self.label
        exists = dialect.table_exists(cursor, self.table)
        mode = spec.schema_save_mode
        if mode == "ERROR_WHEN_SCHEMA_NOT_EXIST" and not exists:
            raise JdbcSinkError(f"Jdbc sink: schema_save_mode is ERROR_WHEN_SCHEMA_NOT_EXIST and table "
                                f"{label} does not exist; create it or choose CREATE_SCHEMA_WHEN_NOT_EXIST")
        if mode == "RECREATE_SCHEMA" and exists:
            cursor.execute(f"DROP TABLE {self.quoted}")
            exists = False
        if mode in ("RECREATE_SCHEMA", "CREATE_SCHEMA_WHEN_NOT_EXIST") and not exists:
            fields = T.StructType([f for f in live_fields(schema) if f.name not in HIDDEN_COLUMNS])
            renamed = T.StructType([T.StructField(self.column(f.name), f.dataType, f.nullable, f.metadata)
                                    for f in fields.fields])
            try:
                ddl = dialect.create_table(self.table, renamed, self.keys, with_key=spec.create_index)
            except UnsupportedType as exc:
                raise JdbcSinkError(f"Jdbc sink: cannot create table {label}{self._for()}: {exc}") from None
            if len(self.table) > 1:     # as SeaTunnel's save mode, the schema (database) too
                dialect.create_schema(cursor, self.table[0])
            cursor.execute(ddl)
            conn.commit()
            return
        if not exists:
            return
        data_mode = spec.data_save_mode
        if data_mode == "DROP_DATA":
            cursor.execute(f"DELETE FROM {self.quoted}")
        elif data_mode == "CUSTOM_PROCESSING":
            cursor.execute(spec.custom_sql)
        elif data_mode == "ERROR_WHEN_DATA_EXISTS":
            cursor.execute(f"SELECT 1 FROM {self.quoted} LIMIT 1")
            if cursor.fetchone() is not None:
                raise JdbcSinkError(f"Jdbc sink: data_save_mode is ERROR_WHEN_DATA_EXISTS and table "
                                    f"{label} has rows; empty it or choose APPEND_DATA or DROP_DATA")
        conn.commit()

    # --- schema changes ------------------------------------------------------------------

    def evolve(self, conn, change: TableChange, behaviour: str) -> None:
        """Apply one change of the input table as ``behaviour`` says (plugin/evolution.py), unless
        the target shows it applied already; a statement the database refuses fails the job naming
        it, except under try_evolve (logged, and the target keeps its shape for that change)."""
        cursor = conn.cursor()
        if self.table is None or not self.dialect.table_exists(cursor, self.table):
            return                       # the save modes create it from the new shape
        existing = set(self.dialect.columns(cursor, self.table))
        column, evolving = self.column(change.column), behaviour in ("evolve", "try_evolve")
        q, target = self.dialect.quote, self.quoted
        ddl = None
        if change.kind == ADD and behaviour != "ignore" and column not in existing:
            ddl = f"ALTER TABLE {target} ADD COLUMN {q(column)} {self.dialect.field_type(change.field)}"
        elif change.kind == DROP and evolving and column in existing:
            ddl = f"ALTER TABLE {target} DROP COLUMN {q(column)}"
        elif change.kind == RENAME:
            new = self.column(change.new_name)
            if evolving:
                self.renames[new] = column
                if column in existing and new not in existing:
                    ddl = f"ALTER TABLE {target} RENAME COLUMN {q(column)} TO {q(new)}"
            elif behaviour == "lenient" and new not in existing:
                ddl = f"ALTER TABLE {target} ADD COLUMN {q(new)} {self.dialect.field_type(change.field)}"
        elif change.kind == RETYPE and column in existing and (evolving or behaviour == "lenient" and change.widens()):
            ddl = self.dialect.retype(target, column, self.dialect.field_type(change.field))
        if ddl is None:
            return
        try:
            cursor.execute(ddl)
            conn.commit()
            log.info("Jdbc sink: %s: %s", self.label, ddl)
        except Exception as exc:  # noqa: BLE001 - the database's own refusal, named below
            conn.rollback()
            reason = _first_line(exc)
            if behaviour == "try_evolve":
                log.warning("Jdbc sink: %s refused %s (%s); the table keeps its shape for it", self.label, ddl, reason)
                return
            raise JdbcSinkError(f"Jdbc sink: table {self.label} refused the schema change {change.describe()}: "
                                f"{ddl}: {reason}") from None

    # --- one batch ---------------------------------------------------------------------

    def new_stage(self, batch_id: int) -> tuple[str, ...]:
        return (*self.stage_schema, f"{self.stage_prefix}{batch_id}_{uuid.uuid4().hex[:8]}")

    def new_local_stage(self, batch_id: int) -> tuple[str, ...]:
        """A temporary staging table's name (PostgreSQL keeps them in a schema of the session's own)."""
        stage = self.new_stage(batch_id)
        return stage[-1:] if self.dialect.name == POSTGRESQL else stage

    def create_stage(self, conn, df, stage: tuple[str, ...]) -> None:
        """This attempt's staging table: the target's column types for the input's fields."""
        dialect, fields = self.dialect, [c for c in df.columns if c not in HIDDEN_COLUMNS]
        def ddl(engine: str | None) -> str:
            if self.table is None:
                try:
                    return dialect.create_stage_for(stage, _user_schema(df), self.spec.query, engine=engine)
                except UnsupportedType as exc:
                    raise JdbcSinkError(f"Jdbc sink: cannot stage the input for query: {exc}") from None
            select = f"SELECT {', '.join(dialect.quote(c) for c in fields)} FROM {self.quoted} WHERE 1 = 0"
            return dialect.create_stage(stage, select, changes=bool(self.spec.primary_keys), engine=engine)

        try:
            conn.cursor().execute(ddl(self.stage_engine))
        except Exception as exc:
            if self.stage_engine is None:
                raise
            # a server that allows only some engines (MySQL's disabled_storage_engines, MariaDB's
            # enforce_storage_engine): its default one, for this and every later batch
            conn.rollback()
            log.info("Jdbc sink %s: staging in the server's default engine (%s refused: %s)", self.label,
                     self.stage_engine, _first_line(exc))
            self.stage_engine = None
            conn.cursor().execute(ddl(None))
        conn.commit()

    def stage(self, df, stage: tuple[str, ...], url: str) -> int:
        """Spark's executors append the batch to the staging table; returns its row count."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        columns = [self.dialect.staged_value(F.col(_spark_name(f.name)), f.dataType).alias(f.name)
                   for f in df.schema.fields if f.name not in HIDDEN_COLUMNS]
        if self.spec.primary_keys:
            kind = F.col(ROW_KIND_COLUMN) if ROW_KIND_COLUMN in df.columns else F.lit(int(RowKind.INSERT))
            columns += [kind.cast("smallint").alias(STAGE_KIND), _source_order(df).alias(STAGE_SEQ)]
        observation = Observation(f"seatide_jdbc_rows_{stage[-1]}")
        staged = df.select(*columns).observe(observation, F.count(F.lit(1)).alias("rows"))
        options = {**self.dialect.staging_properties(), **self.spec.properties,
                   "url": url, "driver": self.driver, "dbtable": self.dialect.qualified(stage),
                   "batchsize": str(self.spec.batch_size)}
        if self.spec.user is not None:
            options["user"] = self.spec.user
        if self.spec.password is not None:
            options["password"] = self.spec.password
        staged.write.format("jdbc").options(**options).mode("append").save()
        return int(observation.get["rows"])

    # --- a batch collected on the driver ----------------------------------------------------

    def local_columns(self, schema) -> "list[tuple[str, list[int]]] | None":
        """How rows collected on the driver (tuples of ``schema``'s values) are staged, as
        ``rename`` stages a frame: each staged column with the positions of the values it takes,
        the first that is not null (a column the source renamed holds its old name's values in
        older rows). None when a value needs Spark's own staging (``Dialect.staged_value``:
        arrays; nested types) or rows go through the user's query."""
        if self.table is None or not all(_plain(f.dataType) for f in schema.fields if f.name not in HIDDEN_COLUMNS):
            return None
        positions = {self.column(f.name): [i] for i, f in enumerate(schema.fields) if f.name not in HIDDEN_COLUMNS}
        if self.behaviour is not None and self.target_columns:
            for new, old in self.renames.items():
                if old in positions:
                    positions[new] = positions.get(new, []) + positions.pop(old)
            kept = set(self.target_columns.values())
            positions = {c: p for c, p in positions.items() if c in kept}
        return list(positions.items())

    def stage_local(self, conn, rows: list[tuple], schema, stage: tuple[str, ...]) -> list[str]:
        """Stage rows collected on the driver into a temporary table of the batch's transaction
        (``Dialect.create_stage``): no Spark job, and nothing left behind for a crash or a zombie
        to clean. Returns the staged columns (``apply_statements`` takes them)."""
        from pyspark.sql import types as T

        columns = self.local_columns(schema)
        names = [f.name for f in schema.fields]
        dialect, keyed = self.dialect, bool(self.spec.primary_keys)
        select = f"SELECT {', '.join(dialect.quote(c) for c, _ in columns)} FROM {self.quoted} WHERE 1 = 0"
        cursor = conn.cursor()
        cursor.execute(dialect.create_stage(stage, select, changes=keyed, temporary=True))
        # Spark hands a TIMESTAMP (an instant) to Python as the local wall-clock time: with its
        # zone, PostgreSQL stores the instant its JDBC writer would (MySQL's client drops the zone).
        zoned = {i for i, f in enumerate(schema.fields) if isinstance(f.dataType, T.TimestampType)}
        kind_at = names.index(ROW_KIND_COLUMN) if ROW_KIND_COLUMN in names else None
        seq_at = names.index(ROW_SEQ_COLUMN) if ROW_SEQ_COLUMN in names else None

        def value(row: tuple, at: list[int]):
            found = next((row[i] for i in at if row[i] is not None), None)
            return found.astimezone() if found is not None and at[0] in zoned else found

        staged = []
        for place, row in enumerate(rows):
            values = [value(row, at) for _, at in columns]
            if keyed:    # without a sequence the rows are in the source's order (see _source_order)
                values += [int(RowKind.INSERT) if kind_at is None else int(row[kind_at]),
                           place if seq_at is None else int(row[seq_at])]
            staged.append(tuple(values))
        names = [c for c, _ in columns] + ([STAGE_KIND, STAGE_SEQ] if keyed else [])
        cursor.executemany(f"INSERT INTO {dialect.qualified(stage)} ({', '.join(dialect.quote(c) for c in names)}) "
                           f"VALUES ({', '.join(['%s'] * len(names))})", staged)
        return [c for c, _ in columns]

    def apply_statements(self, columns: list[str], stage: str) -> list[str]:
        spec, d = self.spec, self.dialect
        if spec.query is not None:
            try:
                return [spec.query.over([d.quote(c) for c in columns], stage, "1 = 1")]
            except QueryError as exc:
                raise JdbcSinkError(f"Jdbc sink: option 'query': {exc}") from None
        keys, target = self.keys, self.quoted
        if not keys:
            return [d.insert_staged(target, stage, columns)]
        # The net change per key (dialect.py): deleted, then upserted, or without upserts
        # updated where the target has the key and inserted where it has not, so neither an
        # INSERT then UPDATE of a new key nor a DELETE then INSERT of an existing one depends
        # on the kind of the key's last change alone.
        changes = [d.delete_staged(target, stage, columns, keys)]
        if spec.enable_upsert:
            changes.append(d.upsert_staged(target, stage, columns, keys))
        else:
            changes += [d.update_last(target, stage, columns, keys), d.insert_missing(target, stage, columns, keys)]
        return changes


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _source_order(df):
    """Each change's place in the source's order (runtime.change_order), which a transform that
    reorders rows keeps; a frame without it is in the source's order already (one fed to the
    writer directly), so the order it is read in is that place."""
    from pyspark.sql import functions as F

    if ROW_SEQ_COLUMN in df.columns:
        return F.col(ROW_SEQ_COLUMN)
    return F.monotonically_increasing_id()


def _plain(data_type) -> bool:
    """A type whose Python value Spark collects is what the database client binds as it is."""
    from pyspark.sql import types as T

    plain = (T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
             T.DecimalType, T.StringType, T.BinaryType, T.DateType, T.TimestampType, T.TimestampNTZType)
    return isinstance(data_type, plain) or type(data_type).__name__ == "TimeType"


def _spark_name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _user_schema(df):
    from pyspark.sql import types as T

    return T.StructType([f for f in df.schema.fields if f.name not in HIDDEN_COLUMNS])


__all__ = ["JdbcSinkError", "JdbcTarget", "SAVE_MODES_WAIT_S"]
