"""One input table's way into the Jdbc sink's target: how its fields are named there, whether
the target fits them, and how Spark's executors stage its rows.

A Jdbc sink writes one table, or, on a multi-table input, one table per input table (each from the
sink built for that table, ``JdbcSinkSpec``); several input tables may share a target (shards
merged). A ``JdbcTarget`` is one input table's route into its target; ``TargetTable``
(target_table.py) is one target with every route that writes it, which is prepared, staged and
applied as one.
"""

from __future__ import annotations

from seatide.connectors.jdbc.dialect import STAGE_GROUP, STAGE_KIND, STAGE_SEQ, Dialect, UnsupportedType
from seatide.connectors.jdbc.task_tries import one_transaction, one_try, task_try
from seatide.connectors.jdbc.query import QueryError
from seatide.connectors.jdbc.sink_session import spark_write
from seatide.connectors.jdbc.spec import JdbcSinkError, JdbcSinkSpec
from seatide.plugin.evolution import COLUMN_ID, RETIRED, live_fields
from seatide.plugin.rowkind import HIDDEN_COLUMNS, ROW_KIND_COLUMN, ROW_SEQ_COLUMN, RowKind


class JdbcTarget:
    def __init__(self, spec: JdbcSinkSpec, dialect: Dialect, table: tuple[str, ...] | None, driver: str,
                 source: str = "", key: str = "", spelled: tuple[str, ...] | None = None):
        self.spec = spec
        self.dialect = dialect
        self.table = table                    # as qualified in the writer's connection; None: query mode
        self.spelled = spelled or table       # as the options name it: messages, and earlier records' names
        self.driver = driver
        self.source = source                  # the input table it receives (multi-table), for messages
        self.key = key                        # the route's key (named its save-mode record before targets were)
        self.target_columns: dict[str, str] = {}    # lower-case name -> the target's spelling
        # Schema evolution (plugin/evolution.py): the source's behaviour, None when its tables do not
        # change; and columns renamed in this run (new name -> old) whose older rows carry the old
        # name, for input without column ids (``renames_in`` finds the others in the rows' shape).
        self.behaviour: str | None = None
        self.renames: dict[str, str] = {}
        # PostgreSQL query mode: the schema the run pinned for the table its statement names unqualified
        # (``TargetNames.schema_of``), first on the search_path while the statement runs
        self.search_first: str | None = None

    @property
    def label(self) -> str:
        return ".".join(self.spelled) if self.spelled else "query"

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
        original = df.schema
        df = df.withColumnsRenamed(renames) if renames else df
        if self.behaviour is None or not self.target_columns:
            return df
        from pyspark.sql import functions as F

        for new, old in self.renames_in(original).items():
            if old in df.columns:
                merged = F.coalesce(F.col(_spark_name(new)), F.col(_spark_name(old))) if new in df.columns \
                    else F.col(_spark_name(old))
                df = df.withColumn(new, merged).drop(old)
        kept = set(self.target_columns.values()) | set(HIDDEN_COLUMNS)
        return df.select(*[F.col(_spark_name(c)) for c in df.columns if c in kept])

    def renames_in(self, schema) -> dict[str, str]:
        """Renamed columns (the target's new name -> old) whose older rows in ``schema`` (the
        input's fields) carry their values under the old name: a retired field with the id of a
        live one. Taken from the rows' shape, which the source keeps with its checkpoint, so that a
        writer started after a crash in the middle of the rename's batch knows it too (finding 20
        of issue 30); and those renamed by this writer (``renames``)."""
        live = {f.metadata[COLUMN_ID]: f.name for f in schema.fields
                if COLUMN_ID in (f.metadata or {}) and not f.metadata.get(RETIRED)}
        found = dict(self.renames)
        for f in schema.fields:
            meta = f.metadata or {}
            if meta.get(RETIRED) and meta.get(COLUMN_ID) in live and live[meta[COLUMN_ID]] != f.name:
                found.setdefault(self.column(live[meta[COLUMN_ID]]), self.column(f.name))
        return found

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

    def check(self, cursor, schema) -> None:
        """That the table exists and fits ``schema`` (the input's fields, Spark's StructType)."""
        if self.table is None:
            return
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
                                f"(its columns: {', '.join(existing)}){self.for_input()}; add the columns or "
                                "drop the fields")
        keys_missing = [k for k in self.keys if k not in fields]
        if keys_missing:
            raise JdbcSinkError(f"Jdbc sink: primary_keys names {', '.join(keys_missing)}, which the input "
                                f"does not have (fields: {', '.join(fields)}){self.for_input()}")
        # Without a matching unique index PostgreSQL refuses ON CONFLICT, and MySQL's ON DUPLICATE
        # KEY would quietly insert a second row for the key.
        if self.keys and self.spec.enable_upsert \
                and frozenset(self.keys) not in dialect.unique_keys(cursor, self.table):
            keys = ", ".join(self.keys)
            raise JdbcSinkError(f"Jdbc sink: table {label} has no primary key or unique index on "
                                f"({keys}), which upserts by primary_keys need; add one (ALTER TABLE ... ADD "
                                f"PRIMARY KEY ({keys})) or set enable_upsert = false")

    def check_ahead(self, cursor, schema, written: bool) -> None:
        """Before any target of the sink is prepared: each check ``check`` and ``save_modes.ensure`` would
        make only after the save modes, made now where the save modes leave the table as it is, so that
        no table is emptied for a batch a table of the sink then refuses (outside review, #4: a missing
        table under ERROR_WHEN_SCHEMA_NOT_EXIST, a missing column, an upsert key with no unique index).
        ``written``: the sink has written the table (its save modes are made). Not for a table its save
        modes make anew (RECREATE_SCHEMA, or made when missing: whether its CREATE TABLE can be built is asked
        through the door, ``save_modes.check_ahead``), nor for one a DDL ``custom_sql`` may alter."""
        spec = self.spec
        if self.table is None or (spec.schema_save_mode == "RECREATE_SCHEMA" and not written):
            return
        if not self.dialect.table_exists(cursor, self.table):
            if spec.schema_save_mode == "ERROR_WHEN_SCHEMA_NOT_EXIST":
                self.check(cursor, schema)          # refuses: it does not exist
            return
        altered = spec.data_save_mode == "CUSTOM_PROCESSING" and spec.custom_sql_is_ddl and not written \
            and not (spec.custom_sql or "").lstrip().upper().startswith("TRUNCATE")
        if schema is not None and not altered:
            self.check(cursor, schema)

    def create_statement(self, schema) -> str:
        """The CREATE TABLE of the table for ``schema`` (the input's fields, named as its columns are); refuses
        a field the dialect has no column type for (a map: written as JSON text), which needs no server."""
        from pyspark.sql import types as T

        fields = [f for f in live_fields(schema) if f.name not in HIDDEN_COLUMNS]
        renamed = T.StructType([T.StructField(self.column(f.name), f.dataType, f.nullable, f.metadata)
                                for f in fields])
        try:
            return self.dialect.create_table(self.table, renamed, self.keys, with_key=self.spec.create_index)
        except UnsupportedType as exc:
            raise JdbcSinkError(f"Jdbc sink: cannot create table {self.label}{self.for_input()}: {exc}") from None

    def for_input(self) -> str:
        return f" (input table {self.source})" if self.source else ""

    # --- one batch ---------------------------------------------------------------------

    def stage(self, df, stage: tuple[str, ...], url: str, group: int | None = None) -> int:
        """Spark's executors append the batch to the staging table; returns its row count.
        ``group``: the column set its rows have (``STAGE_GROUP``), where the target has several."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        columns = [self.dialect.staged_value(F.col(_spark_name(f.name)), f.dataType).alias(f.name)
                   for f in df.schema.fields if f.name not in HIDDEN_COLUMNS]
        if self.spec.primary_keys:
            kind = F.col(ROW_KIND_COLUMN) if ROW_KIND_COLUMN in df.columns else F.lit(int(RowKind.INSERT))
            columns += [kind.cast("smallint").alias(STAGE_KIND), _source_order(df).alias(STAGE_SEQ)]
        else:
            columns += task_try(self.source, self.dialect.name)
        if group is not None:
            columns.append(F.lit(group).cast("smallint").alias(STAGE_GROUP))
        observation = Observation(f"seatide_jdbc_rows_{stage[-1]}")
        staged = df.select(*columns).observe(observation, F.count(F.lit(1)).alias("rows"))
        url, properties = spark_write(self.spec, url)
        options = {**properties, "url": url, "driver": self.driver, "dbtable": self.dialect.qualified(stage),
                   "batchsize": str(self.spec.batch_size)}
        if self.spec.user is not None:
            options["user"] = self.spec.user
        if self.spec.password is not None:
            options["password"] = self.spec.password
        staged.write.format("jdbc").options(**one_transaction(options)).mode("append").save()
        return int(observation.get["rows"])

    def apply_statements(self, column_sets: list[list[str]], stage: str, tried: bool = False) -> list[str]:
        """The statements that apply the staged rows (``stage``, quoted) to the target: one column
        set, or several (the rows of ``STAGE_GROUP`` i have ``column_sets[i]``)."""
        spec, d = self.spec, self.dialect
        if spec.query is not None:
            try:
                statement = spec.query.over([d.quote(c) for c in column_sets[0]], stage,
                                            one_try(d.quote, stage) if tried else "1 = 1")
            except QueryError as exc:
                raise JdbcSinkError(f"Jdbc sink: option 'query': {exc}") from None
            return [*self._search_pinned_first(), statement]
        keys, target = self.keys, self.quoted
        groups = [(None, column_sets[0])] if len(column_sets) == 1 else list(enumerate(column_sets))
        if not keys:
            return [d.insert_staged(target, stage, columns, group, tried) for group, columns in groups]
        # The net change per key (dialect.py): deleted, then upserted, or without upserts
        # updated where the target has the key and inserted where it has not, so neither an
        # INSERT then UPDATE of a new key nor a DELETE then INSERT of an existing one depends
        # on the kind of the key's last change alone.
        changes = [d.delete_staged(target, stage, keys, keys)]
        for group, columns in groups:
            if spec.enable_upsert:
                changes.append(d.upsert_staged(target, stage, columns, keys, group))
            else:
                changes += [d.update_last(target, stage, columns, keys, group),
                            d.insert_missing(target, stage, columns, keys, group)]
        return changes


    def _search_pinned_first(self) -> list[str]:
        """For the batch's transaction (``set_config(..., true)``: SET LOCAL), the pinned schema first on the
        search_path: the query's key and commit records are pinned there, and its statement, resolved by
        the session's search_path, wrote a schema made first on it since (outside review of the pin, #6).
        The session's path follows, where its staging table (made unqualified, before the transaction) is."""
        if self.search_first is None:
            return []
        first = self.dialect.quote(self.search_first).replace("'", "''")
        return [f"SELECT set_config('search_path', '{first}, ' || current_setting('search_path'), true)"]


def first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _source_order(df):
    """Each change's place in the source's order (runtime.change_order), which a transform that
    reorders rows keeps, and which a source numbers across its tables, so that two input tables'
    changes to one key of a shared target order; a frame without it is in the source's order
    already (one fed to the writer directly), so the order it is read in is that place."""
    from pyspark.sql import functions as F

    if ROW_SEQ_COLUMN in df.columns:
        return F.col(ROW_SEQ_COLUMN)
    return F.monotonically_increasing_id()


def _spark_name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


__all__ = ["JdbcTarget", "first_line"]
