"""Jdbc source: SeaTunnel's Jdbc connector (PostgreSQL, MySQL, MariaDB) on Spark.

Two ways to read, chosen by how the job runs:

* plain BATCH (no checkpoints): Spark's own JDBC reader, in parallel ranges of the
  partition column (partitionColumn / lowerBound / upperBound / numPartitions);
* micro-batch (checkpointed BATCH, STREAMING): ``split_reader``, split by split, so a
  restarted job resumes after the last committed split. A Jdbc source is bounded: in a
  STREAMING job it reads its splits and then stays idle.

Column types are asked of the database once, on the driver (``read_types.describe``);
both ways deliver SeaTunnel's type for every column.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pyspark.sql import types as T

from seatide.connectors.jdbc.partitioning import SPLITTABLE, Partitioning, split_kind
from seatide.connectors.jdbc.read_types import (ReadColumn, UnsupportedColumnType, describe, first_line,
                                                is_sql_error, quote, select_list)
from seatide.connectors.jdbc.source_options import JDBC_SOURCE_OPTIONS
from seatide.connectors.jdbc.spark_reads import SparkJdbcReads, task_slots
from seatide.connectors.jdbc.split_measure import STRING_SPLIT_MODES, estimate_spec, measure
from seatide.connectors.jdbc.splits import STRING, SplitPlan
from seatide.connectors.jdbc.url import POSTGRESQL, JdbcUrl, JdbcUrlError
from seatide.plugin.base import BatchOffsets, ReadContext, Source, use_python_data_source
from seatide.plugin.options import OptionError, read_options
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.plugin.tables import TableLayout, TableRows
from seatide.plugin.types import source_metadata

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from seatide.plugin.schema import Schema

@register
class JdbcSource(SparkJdbcReads, Source):
    """Reads the rows of ``query`` (or of ``table_path``) from PostgreSQL, MySQL or MariaDB,
    split by value ranges of ``partition_column`` (``partitioning``)."""

    plugin_name = "Jdbc"
    options = JDBC_SOURCE_OPTIONS
    doc = __doc__ or ""

    # -- validation ----------------------------------------------------------------------
    def check(self) -> None:
        try:
            self.url = JdbcUrl.parse(self.opts["url"])
        except JdbcUrlError as exc:
            raise self.invalid("url", str(exc)) from None
        self._parts: list[JdbcSource] | None = None       # table_list: each table's own source
        if self.opts["table_list"] is not None:
            self._parts = self._listed_tables()
            return
        if not self.opts["query"] and not self.opts["table_path"]:
            raise self.invalid("query", "the Jdbc source needs `query` (a SELECT) or `table_path` "
                               "(e.g. table_path = \"public.orders\")")
        where = (self.opts["where_condition"] or "").strip()
        if where and not where.lower().startswith("where "):
            raise self.invalid("where_condition", f"where_condition must start with `where`, e.g. "
                               f"where_condition = \"where id > 100\"; got \"{where}\"")
        for key, low in (("partition_num", 1), ("split.size", 1), ("fetch_size", 0)):
            if self.opts[key] is not None and self.opts[key] < low:
                raise self.invalid(key, f"option '{key}' must be at least {low}, got {self.opts[key]}")
        if self.opts["split.string_split_mode"] not in STRING_SPLIT_MODES:
            raise self.invalid("split.string_split_mode", "split.string_split_mode must be sample or charset_based, "
                               f"got \"{self.opts['split.string_split_mode']}\"")
        self.driver = self.url.driver_class(self.opts["driver"])
        self.base_sql = self._base_sql(where)
        self._columns: list[ReadColumn] | None = None
        try:
            self._columns = describe(self.url, self.opts["user"], self.opts["password"], self.base_sql)
        except UnsupportedColumnType as exc:
            raise self.invalid("query", str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - an unreachable database is checked again at read time
            if is_sql_error(exc):
                raise self.invalid("query" if self.opts["query"] else "table_path",
                                   f"the database rejected the Jdbc source's query: {first_line(exc)}") from None
        if self._columns is not None:
            self._resolve_partition_column()

    def _listed_tables(self) -> "list[JdbcSource]":
        """table_list: one source per entry, from this block's options with the entry's on top
        (its table_path, query, partition and split options), as SeaTunnel reads the list."""
        entries = self.opts["table_list"]
        if not entries:
            raise self.invalid("table_list", "table_list is empty: list the tables, e.g. "
                               "table_list = [{ table_path = \"testdb.table1\" }]")
        for key in ("table_path", "query"):
            if self.opts[key]:
                raise self.invalid(key, f"give table_list or {key}, not both: put {key} in a table_list entry")
        shared = {k: self.opts[k] for k in self.opts if self.opts.given(k) and k != "table_list"}
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or not entry.get("table_path"):
                where = f"table_list[{i}]"
                raise self.invalid(where, f"{where} needs table_path (and may give query, partition_column, "
                                   "split.size...), e.g. { table_path = \"testdb.table1\" }")

        def part_of(item: tuple[int, dict]):
            # each entry's check asks the database for its columns and key: a few at once
            i, entry = item
            try:
                options = read_options({**shared, **entry}, JDBC_SOURCE_OPTIONS, strict=self.check_keys.strict)
                return JdbcSource(options, self.parallelism, self.env), options
            except OptionError as exc:
                return exc, None

        parts = []
        for i, (part, options) in enumerate(_each_table(part_of, list(enumerate(entries)))):
            where = f"table_list[{i}]"
            if isinstance(part, OptionError):
                raise self.invalid(f"{where}.{part.option}", f"{where}: {part.message}") from None
            self.notices += [replace(n, key=f"{where}.{n.key}") for n in (*part.notices, *options.unknown)]
            parts.append(part)
        names = [p._catalog_table() for p in parts]
        twice = next((n for n in names if names.count(n) > 1), None)
        if twice is not None:
            raise self.invalid("table_list", f"table_list reads table {twice} twice: list each table once")
        return parts

    def _one(self) -> "JdbcSource":
        """The source that reads the one table (itself, or its only table_list entry)."""
        return self._parts[0] if self._parts is not None and len(self._parts) == 1 else self

    def multi_table(self) -> bool:
        return self._parts is not None and len(self._parts) > 1

    def expands_batches(self) -> bool:
        return True

    def _tables_read(self) -> "list[JdbcSource]":
        return self._parts if self._parts is not None else [self]

    def _base_sql(self, where: str) -> str:
        if self.opts["query"]:
            sql = self.opts["query"].strip().rstrip(";")
            return f"SELECT * FROM ({sql}) seatide_w {where}" if where else sql
        return f"SELECT * FROM {self._table()} {where}".strip()

    def _path_parts(self) -> list[str]:
        """table_path's dotted parts, unquoted."""
        return [p.strip().strip('"`') for p in self.opts["table_path"].split(".")]

    def _table(self) -> str:
        parts = self._path_parts()
        if self.url.dialect == POSTGRESQL and len(parts) == 3:
            parts = parts[1:]            # db.schema.table: the database is the URL's
        if not 1 <= len(parts) <= 2 or not all(parts):
            raise self.invalid("table_path", f"table_path \"{self.opts['table_path']}\" is not a table name: "
                               "write db.table (MySQL) or db.schema.table / schema.table (PostgreSQL)")
        return ".".join(quote(self.url.dialect, p) for p in parts)

    def _resolve_partition_column(self) -> None:
        by_name = {c.name: c for c in self._columns}
        name = self.opts["partition_column"]
        if name is None and self.opts["table_path"]:
            name = next((k for k in self._primary_key()[1] if split_kind(by_name.get(k)) is not None), None)
        if name is None:
            self.partition = None
            return
        column = by_name.get(name)
        if column is None:
            raise self.invalid("partition_column", f"partition_column '{name}' is not a column of the query "
                               f"(columns: {', '.join(by_name)})")
        if split_kind(column) is None:
            raise self.invalid("partition_column", f"partition_column '{name}' is {column.db_type}; it must be "
                               f"{SPLITTABLE} (SeaTide splits by value ranges of it)")
        self.partition = column

    @property
    def partitioning(self) -> Partitioning:
        return Partitioning(self.url.dialect, self.partition, self.opts["split.string_split_mode"],
                            self.opts["split.string_split_mode_collate"])

    def _primary_key(self) -> tuple[str, list[str]]:
        """(constraint name, columns in key order) of table_path's primary key; ("", []) if none."""
        if getattr(self, "_key", None) is not None:
            return self._key
        parts = self._path_parts()
        with self.url.connect(self.opts["user"], self.opts["password"], autocommit=True) as conn:
            cursor = conn.cursor()
            if self.url.dialect == POSTGRESQL:
                cursor.execute("SELECT c.conname, a.attname FROM pg_constraint c JOIN pg_attribute a "
                               "ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey) WHERE c.conrelid = "
                               "%s::regclass AND c.contype = 'p' ORDER BY array_position(c.conkey, a.attnum)",
                               (self._table(),))
            else:
                schema = parts[-2] if len(parts) >= 2 else None
                cursor.execute("SELECT CONSTRAINT_NAME, COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE "
                               "WHERE TABLE_SCHEMA = COALESCE(%s, DATABASE()) AND TABLE_NAME = %s AND "
                               "CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION", (schema, parts[-1]))
            rows = cursor.fetchall()
        self._key = (rows[0][0] if rows else "", [row[1] for row in rows])
        return self._key

    def _key_first(self) -> str | None:
        try:
            return next(iter(self._primary_key()[1]), None)
        except Exception:  # noqa: BLE001 - a catalog it cannot read: no index known to probe, so count
            return None

    def _catalog_table(self) -> str:
        """table_path as SeaTunnel's catalog names it: database.schema.table on PostgreSQL, database.table on MySQL."""
        parts = self._path_parts()
        if self.url.dialect == POSTGRESQL:
            parts = [self.url.database or "", "public", *parts][-3:] if len(parts) == 1 else \
                ([self.url.database or "", *parts] if len(parts) == 2 else parts)
        elif len(parts) == 1 and self.url.database:
            parts = [self.url.database, *parts]
        return ".".join(p for p in parts if p)

    # -- contract ----------------------------------------------------------------------
    def tables(self) -> "list[Schema] | None":
        if self.multi_table():
            return [p._table_schema(named=True) for p in self._parts]
        return super().tables()

    def declared_schema(self) -> "Schema | None":
        """The table's columns, name and primary key, read from the database at load time (sinks'
        catalog); after a query only the columns are known (a table_list entry's query keeps its
        table_path's name)."""
        one = self._one()
        if one is not self:
            return one._table_schema(named=True)
        return self._table_schema(named=False)

    def _table_schema(self, named: bool) -> "Schema | None":
        from seatide.plugin.schema import Column, PrimaryKey, Schema

        if self._columns is None:
            return Schema((), self._catalog_table()) if named else None
        columns = tuple(Column(c.name, c.spark_type) for c in self._columns)
        if not self.opts["table_path"] or (self.opts["query"] and not named):
            return Schema(columns)
        try:
            name, key = self._primary_key()
        except Exception:  # noqa: BLE001 - catalogs it cannot read: the table is still named, unkeyed
            name, key = "", []
        names = {c.name for c in columns}
        primary = PrimaryKey(name, tuple(key)) if key and set(key) <= names else None
        return Schema(columns, self._catalog_table(), primary_key=primary)

    def schema(self) -> T.StructType | None:
        one = self._one()
        if one is not self:
            return one.schema()
        if self._parts is not None or self._columns is None:
            return None
        return T.StructType([T.StructField(c.name, c.spark_type, True, source_metadata(self.url.dialect, c.source_type))
                             for c in self._columns])

    def table_layout(self, ctx: ReadContext) -> TableLayout:
        return TableLayout.of((p._catalog_table() if p.opts["table_path"] else "query", p.schema())
                              for p in self._tables_read())

    def read(self, ctx: ReadContext) -> "DataFrame":
        if self._parts is not None:
            if not self.multi_table():
                return self._one().read(ctx)
            for part in self._parts:
                part._described()
            if not ctx.micro_batch:      # one descriptor per table, each read by Spark's parallel reader
                from seatide.connectors.jdbc.table_plans import DESCRIPTORS

                return ctx.spark.createDataFrame([(i, None) for i in range(len(self._parts))], DESCRIPTORS)
            return self._planned(ctx)
        self._described()
        if ctx.micro_batch and ctx.expand_batches:
            return self._planned(ctx)         # each batch's splits read by Spark's JDBC reader
        return self._streamed(ctx) if ctx.micro_batch else self._parallel(ctx)

    def _described(self) -> None:
        if self._columns is None:          # the database was unreachable when the job was loaded
            self._columns = describe(self.url, self.opts["user"], self.opts["password"], self.base_sql)
            self._resolve_partition_column()

    def batch_rows(self, batch: "DataFrame", ctx: ReadContext, offsets: BatchOffsets | None = None) -> TableRows:
        """A batch's splits as each table's rows apart (``TableRows.per_table``), read by Spark's
        JDBC reader: in a micro-batch, one partition per split descriptor, derived from the batch's
        ``offsets`` (the stream's own rows, the same descriptors, are never read: that would be a
        Spark job through a Python worker per batch); in the plain batch, every table by Spark's
        parallel reader. Never a union of the tables: taking each table back out of one would cost
        an analysis of the whole union per table."""
        from seatide.connectors.jdbc.table_plans import batch_descriptors

        parts = self._tables_read()
        if not ctx.micro_batch:
            frames = dict(enumerate(_each_table(lambda p: p._parallel(ctx), parts)))
            return TableRows(None, tables=tuple(frames), separable=True, per_table=frames)
        if offsets is None:
            raise ValueError("a micro-batch of the Jdbc source is read from its offsets: pass the batch's BatchOffsets")
        runs: dict[int, list[str]] = {}
        for table, predicate in batch_descriptors(offsets.start, offsets.end, self._quoted_columns(), task_slots(ctx)):
            runs.setdefault(table, []).append(predicate or "1 = 1")
        ordered = sorted(runs.items())
        frames = dict(zip([i for i, _ in ordered],
                          _each_table(lambda run: parts[run[0]]._predicated(ctx, run[1]), ordered)))
        return TableRows(None, tables=tuple(frames), separable=True, per_table=frames)

    def _quoted_columns(self) -> list[str | None]:
        """Each table's partition column as its SQL names it (None: one split, the whole query)."""
        return [p.partitioning.quoted for p in self._tables_read()]

    def _planned(self, ctx: ReadContext) -> "DataFrame":
        """The stream of split descriptors of every table (connectors/jdbc/table_plans.py)."""
        import json

        from seatide.connectors.jdbc.table_plans import SOURCE_NAME, JdbcTablePlans

        use_python_data_source(ctx.spark, JdbcTablePlans)
        spec = {"url": self.url.text, "user": self.opts["user"], "password": self.opts["password"],
                "max_rows": ctx.max_rows_per_batch, "tasks": task_slots(ctx),
                "tables": [{**p._split_spec(), "quoted_column": p.partitioning.quoted} for p in self._tables_read()]}
        if not ctx.resuming:
            # Measured here, where the database client is loaded and connected already: the
            # stream's Python process would import it first (0.2-0.3 s before the first batch).
            # Unused when the checkpoint has offsets after all: their plans win.
            spec["plans"] = [p.plan().to_json() for p in self._tables_read()]
        return ctx.spark.readStream.format(SOURCE_NAME).option("spec", json.dumps(spec)).load()

    # -- SQL the two readers share -----------------------------------------------------
    def _bounded_sql(self) -> str:
        """The base query, kept to partition_lower_bound..partition_upper_bound when given."""
        return self.partitioning.bounded_sql(self.base_sql, self.opts["partition_lower_bound"],
                                             self.opts["partition_upper_bound"])

    def _select_sql(self) -> str:
        return f"SELECT {select_list(self.url.dialect, self._columns)} FROM ({self._bounded_sql()}) seatide_t"

    def _plan_sql(self, *, count: bool = True) -> str:
        return self.partitioning.plan_sql(self._bounded_sql(), count)

    def _split_options(self) -> dict:
        """What measuring a plan takes besides the plan's SQL and sizes (``split_measure``)."""
        return self.partitioning.spec(self._bounded_sql())

    def _split_spec(self, count: bool = True) -> dict:
        estimate = self._estimate() if count else None
        return {"plan_sql": self._plan_sql(count=count and estimate is None), "split_size": self.opts["split.size"],
                "partition_num": self.opts["partition_num"], **self._split_options(), "estimate": estimate}

    def _estimate(self) -> dict | None:
        """How the statistics size a whole table split by its key's index (``split_measure``);
        None: the rows are counted (a query, a filter, bounds, or a column with no index to probe)."""
        opts, column = self.opts, self.partition
        if column is None or opts["query"] or opts["where_condition"] or self.partitioning.kind == STRING or \
                opts["partition_lower_bound"] is not None or opts["partition_upper_bound"] is not None or \
                self._key_first() != column.name:
            return None
        parts = self._path_parts()
        return estimate_spec(self.url.dialect, self._table(), parts[-2] if len(parts) >= 2 else None, parts[-1],
                             self.partitioning.quoted, self._bounded_sql())

    def plan(self, *, count: bool = True, tiles: int | None = None) -> SplitPlan:
        """Measure the query now and cut it into splits (by partition_num alone without ``count``;
        a string column into ``tiles`` splits when given)."""
        with self.url.connect(self.opts["user"], self.opts["password"], autocommit=True) as conn:
            return measure(conn, self._split_spec(count), tiles)

    # -- micro-batch: split by split ---------------------------------------------------
    def _streamed(self, ctx: ReadContext) -> "DataFrame":
        from seatide.connectors.jdbc.split_reader import SOURCE_NAME, JdbcSplitSource, stream_options

        spark = ctx.spark
        use_python_data_source(spark, JdbcSplitSource)
        options = stream_options(
            url=self.url.text, user=self.opts["user"], password=self.opts["password"],
            select_sql=self._select_sql(), plan_sql=self._plan_sql(), quoted_column=self.partitioning.quoted,
            converts=[c.convert for c in self._columns], split_size=self.opts["split.size"],
            partition_num=self.opts["partition_num"], fetch_size=self.opts["fetch_size"],
            max_rows=ctx.max_rows_per_batch, tasks=task_slots(ctx), **self._split_options())
        rows = spark.readStream.format(SOURCE_NAME).schema(self.schema()).options(**options).load()
        return rows.selectExpr("*", f"CAST(0 AS TINYINT) AS `{ROW_KIND_COLUMN}`")


# Each table's frame costs a query of the database on the driver (its bounds: a Python client)
# and one from Spark's JVM (its columns), and a Spark analysis: ≈0.1 s a table, mostly waiting
# on the database, so a table_list's frames are made a few at a time (100 tables: 10.4 s one
# after another at load ≈5).
TABLE_PLANNERS = 4


def _each_table(make, items: list) -> list:
    """``make(item)`` for every item, in order, a few at once."""
    if len(items) <= 1:
        return [make(item) for item in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(TABLE_PLANNERS, len(items)), thread_name_prefix="jdbc-plan") as pool:
        return list(pool.map(make, items))


__all__ = ["JdbcSource"]
