"""The Jdbc sink's writer: one micro-batch, committed exactly once in one database transaction.

Protocol for one batch:

1. If ``seatide_sink_commits`` holds the batch's transaction id, the batch was committed
   by an earlier attempt (whose driver may have died before the runtime's own commit log
   heard of it): nothing is written.
2. Before the sink's first batch ever: the save modes (create, recreate, empty the table...).
3. Spark's executors append the batch to a staging table of this attempt's own
   (``seatide_stage_<sink>_<batch>_<attempt>``, next to the target, with the target's column
   types), with Spark's batched JDBC writer; keyed sinks add each row's kind and a sequence
   number that orders changes to one key.
4. The driver, in ONE transaction: inserts the commit record (its primary key makes a
   racing attempt of the same batch wait, then fail), applies the staged rows to the target
   set-wise, asks ``batch.fence()`` whether this driver is still the job's current attempt,
   and commits. The staging table is dropped with it (PostgreSQL: inside the transaction).

Staging tables of attempts that never committed are never applied; each commit drops every
staging table the sink has left (a zombie still staging into one then fails).

The database transaction is the batch's commit point (LocalFile's is a store decision, see
``runtime.commit_log``). A zombie driver that passes ``batch.fence()`` just before it is
replaced commits the batch once, with the rows of the offsets Spark logged for it; the
replacement's replay then finds the record and writes nothing. No store decision could
close that window (the database cannot make its commit depend on the store); see
docs/connectors/jdbc-sink.md, "Zombie drivers".
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid

from seatide import failpoints
from seatide.connectors.jdbc.commit_record import CommitRecords
from seatide.connectors.jdbc.dialect import STAGE_KIND, STAGE_SEQ, Dialect, UnsupportedType
from seatide.connectors.jdbc.named_lock import named_lock
from seatide.connectors.jdbc.url import POSTGRESQL
from seatide.connectors.jdbc.query import QueryError
from seatide.connectors.jdbc.sink import JdbcSinkSpec
from seatide.plugin.base import Batch, PermanentError, SinkContext, SinkWriter
from seatide.plugin.rowkind import ROW_KIND_COLUMN, RowKind

log = logging.getLogger(__name__)

# A writer waits this long for another writer of the sink that is making its save modes.
SAVE_MODES_WAIT_S = 60.0


# Driver classes SeaTunnel configs name, and the bundled class that serves the same databases.
class JdbcSinkError(PermanentError):
    """A table or field that contradicts the options; the message says what to change."""


class JdbcWriter(SinkWriter):
    def __init__(self, spec: JdbcSinkSpec, ctx: SinkContext):
        self.spec = spec
        self.dialect = Dialect(spec.url.dialect)
        self.sink_id = f"{ctx.job_id}/{ctx.pipeline_id}/{ctx.plugin_id}"
        self.retained = ctx.checkpoints_retained
        self.database = spec.database
        schema = spec.table[0] if spec.table and len(spec.table) > 1 else None
        self.records = CommitRecords(self.dialect, schema)
        self._ready = False       # commit table made, save modes applied, target checked
        self._stage_prefix = f"seatide_stage_{hashlib.sha1(self.sink_id.encode()).hexdigest()[:12]}_"
        self._stage_schema = spec.table[:-1] if spec.table else ()
        self._target_columns: dict[str, str] = {}   # lower-case name -> the target's spelling
        self.driver = self._loadable_driver(ctx.spark)

    def _loadable_driver(self, spark) -> str:
        """The ``driver`` class (MySQL's Connector/J names stand for the bundled MariaDB driver)."""
        driver = self.spec.driver       # already resolved by the sink (url.driver_class)
        if spark is None or _jvm_has_class(spark, driver):
            return driver
        raise JdbcSinkError(f"Jdbc sink: option 'driver': class {driver} is not on the class path; use "
                            f"{self.spec.url.default_driver} or add the driver's jar to SeaTide's JDBC jars")

    # --- one batch ---------------------------------------------------------------------

    def write_batch(self, df, batch: Batch) -> dict:
        with self._connection() as conn:
            cursor = conn.cursor()
            if not self._ready:
                self.records.create(cursor)
                conn.commit()
            done = self.records.rows_of(cursor, batch.transaction_id)
            conn.rollback()
            if done is not None:     # committed in the database, not yet in the runtime's log
                return {"rows": done, "replayed": True}
            if not self._ready:
                # A branch that has committed batches (under a SeaTide that kept no save-mode
                # record) made its save modes before them.
                first = not self.records.any_for(cursor, self.sink_id, _lineage(batch))
                self._prepare(conn, self._rename(df), batch if first else None)
                self._drop_stages(conn)     # what crashed attempts left
                self._ready = True
            df = self._rename(df)
            stage = (*self._stage_schema, f"{self._stage_prefix}{batch.batch_id}_{uuid.uuid4().hex[:8]}")
            started = time.perf_counter()
            self._create_stage(conn, df, stage)
            rows = self._stage(df, stage)
            staged = time.perf_counter()
            self._commit(conn, df, batch, stage, rows)
            self._drop_stages(conn)
            self._prune(conn, batch)
            log.info("Jdbc sink %s: batch %s, %d rows staged in %.2f s, applied and committed in %.2f s",
                     self.sink_id, batch.batch_id, rows, staged - started, time.perf_counter() - staged)
        return {"rows": rows}

    def end_of_data(self, state: dict) -> None:
        """A bounded pipeline is done: staging tables of attempts that never committed go."""
        with self._connection() as conn:
            self._drop_stages(conn)

    # --- steps -------------------------------------------------------------------------

    def _rename(self, df):
        """Field names as written to the database: field_ide, then the target's own spelling."""
        renames = {name: self._column(name) for name in df.columns if name != ROW_KIND_COLUMN}
        renames = {k: v for k, v in renames.items() if k != v}
        return df.withColumnsRenamed(renames) if renames else df

    def _column(self, field: str) -> str:
        ide, known = self.spec.field_ide, self._target_columns
        name = field.upper() if ide == "UPPERCASE" else field.lower() if ide == "LOWERCASE" else field
        if known and name not in known.values():
            name = known.get(name.lower(), name)
        return name

    @property
    def keys(self) -> list[str]:
        """primary_keys as columns of the target (field_ide and the target's spelling applied)."""
        return [self._column(k) for k in self.spec.primary_keys]

    def _prepare(self, conn, df, first: Batch | None) -> None:
        cursor = conn.cursor()
        spec, dialect = self.spec, self.dialect
        if spec.table is None:
            return
        if first is not None:   # only before the sink's first batch ever, as SeaTunnel does before the job starts
            self._save_modes_once(conn, df, first.save_modes_key)
        if not dialect.table_exists(cursor, spec.table):
            raise JdbcSinkError(f"Jdbc sink: table {'.'.join(spec.table)} does not exist (schema_save_mode is "
                                f"{spec.schema_save_mode}); create it or use CREATE_SCHEMA_WHEN_NOT_EXIST")
        existing = dialect.columns(cursor, spec.table)
        self._target_columns = {c.lower(): c for c in existing}
        renamed = self._rename(df)
        fields = [c for c in renamed.columns if c != ROW_KIND_COLUMN]
        missing = [c for c in fields if c not in existing]
        if missing:
            raise JdbcSinkError(f"Jdbc sink: table {'.'.join(spec.table)} has no column {', '.join(missing)} "
                                f"(its columns: {', '.join(existing)}); add the columns or drop the fields")
        keys_missing = [k for k in self.keys if k not in fields]
        if keys_missing:
            raise JdbcSinkError(f"Jdbc sink: primary_keys names {', '.join(keys_missing)}, which the input "
                                f"does not have (fields: {', '.join(fields)})")
        # Without a matching unique index PostgreSQL refuses ON CONFLICT, and MySQL's ON DUPLICATE
        # KEY would quietly insert a second row for the key.
        if self.keys and spec.enable_upsert \
                and frozenset(self.keys) not in dialect.unique_keys(cursor, spec.table):
            keys = ", ".join(self.keys)
            raise JdbcSinkError(f"Jdbc sink: table {'.'.join(spec.table)} has no primary key or unique index on "
                                f"({keys}), which upserts by primary_keys need; add one (ALTER TABLE ... ADD "
                                f"PRIMARY KEY ({keys})) or set enable_upsert = false")

    def _create_stage(self, conn, df, stage: tuple[str, ...]) -> None:
        """This attempt's staging table: the target's column types for the input's fields."""
        dialect, fields = self.dialect, [c for c in df.columns if c != ROW_KIND_COLUMN]
        if self.spec.table is None:
            try:
                ddl = dialect.create_stage_for(stage, self._user_schema(df), self.spec.query)
            except UnsupportedType as exc:
                raise JdbcSinkError(f"Jdbc sink: cannot stage the input for query: {exc}") from None
        else:
            select = f"SELECT {', '.join(dialect.quote(c) for c in fields)} FROM {self._target} WHERE 1 = 0"
            ddl = dialect.create_stage(stage, select, changes=bool(self.spec.primary_keys))
        self._execute(conn.cursor(), ddl)
        conn.commit()

    def _save_modes_once(self, conn, df, key: str) -> None:
        """The save modes, made once per run of the sink however many drivers run it.

        A zombie (a replaced driver that still runs) held before this step would otherwise
        empty or drop the table after its replacement committed into it. Under a lock both
        share in the target database, the first to come applies them and records ``key`` in
        ``seatide_sink_commits``; whoever comes after finds the record and does nothing."""
        failpoints.hit("sink.save_modes")
        cursor = conn.cursor()
        with named_lock(cursor, self.dialect.name, key, SAVE_MODES_WAIT_S):
            conn.rollback()        # a snapshot taken before the lock (MySQL) would not see the record
            if self.records.rows_of(cursor, key) is None:
                self._apply_save_modes(conn, df)
                self.records.insert(cursor, key, self.sink_id, -1, 0)
            conn.commit()

    def _apply_save_modes(self, conn, df) -> None:
        cursor = conn.cursor()
        spec, dialect = self.spec, self.dialect
        exists = dialect.table_exists(cursor, spec.table)
        mode = spec.schema_save_mode
        if mode == "ERROR_WHEN_SCHEMA_NOT_EXIST" and not exists:
            raise JdbcSinkError(f"Jdbc sink: schema_save_mode is ERROR_WHEN_SCHEMA_NOT_EXIST and table "
                                f"{'.'.join(spec.table)} does not exist; create it or choose CREATE_SCHEMA_WHEN_NOT_EXIST")
        if mode == "RECREATE_SCHEMA" and exists:
            cursor.execute(f"DROP TABLE {self._target}")
            exists = False
        if mode in ("RECREATE_SCHEMA", "CREATE_SCHEMA_WHEN_NOT_EXIST") and not exists:
            try:
                ddl = dialect.create_table(spec.table, self._user_schema(df), self.keys,
                                           with_key=spec.create_index)
            except UnsupportedType as exc:
                raise JdbcSinkError(f"Jdbc sink: cannot create table {'.'.join(spec.table)}: {exc}") from None
            cursor.execute(ddl)
            conn.commit()
            return
        if not exists:
            return
        data_mode = spec.data_save_mode
        if data_mode == "DROP_DATA":
            cursor.execute(f"DELETE FROM {self._target}")
        elif data_mode == "CUSTOM_PROCESSING":
            self._execute(cursor, spec.custom_sql)
        elif data_mode == "ERROR_WHEN_DATA_EXISTS":
            cursor.execute(f"SELECT 1 FROM {self._target} LIMIT 1")
            if cursor.fetchone() is not None:
                raise JdbcSinkError(f"Jdbc sink: data_save_mode is ERROR_WHEN_DATA_EXISTS and table "
                                    f"{'.'.join(spec.table)} has rows; empty it or choose APPEND_DATA or DROP_DATA")
        conn.commit()

    def _stage(self, df, stage: tuple[str, ...]) -> int:
        """Spark's executors append the batch to the staging table; returns its row count."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        columns = [self.dialect.staged_value(F.col(self._spark_name(f.name)), f.dataType).alias(f.name)
                   for f in df.schema.fields if f.name != ROW_KIND_COLUMN]
        if self.spec.primary_keys:
            kind = F.col(ROW_KIND_COLUMN) if ROW_KIND_COLUMN in df.columns else F.lit(int(RowKind.INSERT))
            columns += [kind.cast("smallint").alias(STAGE_KIND), F.monotonically_increasing_id().alias(STAGE_SEQ)]
        observation = Observation(f"seatide_jdbc_rows_{stage[-1]}")
        staged = df.select(*columns).observe(observation, F.count(F.lit(1)).alias("rows"))
        options = {**self.dialect.staging_properties(), **self.spec.properties,
                   "url": self.spec.url.for_spark(self.database),
                   "driver": self.driver, "dbtable": self.dialect.qualified(stage),
                   "batchsize": str(self.spec.batch_size)}
        if self.spec.user is not None:
            options["user"] = self.spec.user
        if self.spec.password is not None:
            options["password"] = self.spec.password
        staged.write.format("jdbc").options(**options).mode("append").save()
        return int(observation.get["rows"])

    def _commit(self, conn, df, batch: Batch, stage: tuple[str, ...], rows: int) -> None:
        cursor = conn.cursor()
        try:
            self.records.insert(cursor, batch.transaction_id, self.sink_id, batch.batch_id, rows)
        except Exception:
            conn.rollback()
            if self.records.rows_of(conn.cursor(), batch.transaction_id) is not None:
                conn.rollback()
                log.warning("batch %s was committed by another attempt meanwhile", batch.transaction_id)
                return
            raise
        columns = [c for c in df.columns if c != ROW_KIND_COLUMN]
        for statement in self._apply_statements(columns, self.dialect.qualified(stage)):
            self._execute(cursor, statement)
        if self.dialect.name == POSTGRESQL:   # DDL is transactional there; MySQL's DROP would commit
            cursor.execute(f"DROP TABLE {self.dialect.qualified(stage)}")
        try:
            batch.fence()    # a zombie driver's batch must not commit
        except BaseException:
            conn.rollback()
            raise
        conn.commit()

    def _apply_statements(self, columns: list[str], stage: str) -> list[str]:
        spec, d = self.spec, self.dialect
        if spec.query is not None:
            try:
                return [spec.query.over([d.quote(c) for c in columns], stage, "1 = 1")]
            except QueryError as exc:
                raise JdbcSinkError(f"Jdbc sink: option 'query': {exc}") from None
        keys, target = self.keys, self._target
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

    def _drop_stages(self, conn) -> None:
        """Drop every staging table this sink has left (attempts that crashed or were replaced)."""
        cursor = conn.cursor()
        cursor.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = "
                       + ("%s" if self._stage_schema else self._current_schema), self._stage_schema or None)
        for (name,) in cursor.fetchall():
            if name.startswith(self._stage_prefix):
                cursor.execute(f"DROP TABLE IF EXISTS {self.dialect.qualified((*self._stage_schema, name))}")
        conn.commit()

    def _prune(self, conn, batch: Batch) -> None:
        cursor = conn.cursor()
        self.records.prune(cursor, self.sink_id, _lineage(batch), batch.batch_id - self.retained)
        conn.commit()

    # --- housekeeping ------------------------------------------------------------------

    def _connection(self):
        spec = self.spec
        conn = spec.url.connect(spec.user, spec.password, database=self.database,
                                connect_timeout=spec.connect_timeout)
        return _Closing(conn)

    @staticmethod
    def _execute(cursor, sql: str) -> None:
        cursor.execute(sql)   # no parameters: neither client then reads % in the SQL as a placeholder

    @property
    def _current_schema(self) -> str:
        return "current_schema()" if self.dialect.name == POSTGRESQL else "DATABASE()"

    @property
    def _target(self) -> str:
        return self.dialect.qualified(self.spec.table)

    @staticmethod
    def _spark_name(name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    @staticmethod
    def _user_schema(df):
        from pyspark.sql import types as T

        return T.StructType([f for f in df.schema.fields if f.name != ROW_KIND_COLUMN])


def _jvm_has_class(spark, name: str) -> bool:
    try:
        spark.sparkContext._jvm.java.lang.Class.forName(name)
        return True
    except Exception:
        return False


class _Closing:
    """Closes a DB-API connection on exit, rolling back what was not committed."""

    def __init__(self, conn):
        self.conn = conn

    def __enter__(self):
        return self.conn

    def __exit__(self, *exc):
        try:
            self.conn.rollback()
        finally:
            self.conn.close()
        return False




def _lineage(batch: Batch) -> str:
    """The transaction id without its batch number: one run of the pipeline's checkpoint."""
    suffix = f"_{batch.batch_id}"
    return batch.transaction_id[:-len(suffix)] if batch.transaction_id.endswith(suffix) else batch.transaction_id


__all__ = ["JdbcSinkError", "JdbcWriter"]
