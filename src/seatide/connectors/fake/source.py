"""FakeSource: rows made up from a schema, for demos, tests and benchmarks (SeaTunnel's options).

Every column is a Spark SQL expression over the global row number ``__g`` (see ``values``),
so rows are made by the JVM and a replayed split yields identical rows. Where the row
numbers come from depends on how the job runs:

* plain BATCH: ``spark.range`` — no Python data source, no per-row Python;
* micro-batch (STREAMING, or BATCH with checkpoints): a Python streaming source admits
  split descriptors batch by batch (``split_stream``), expanded with ``explode(sequence)``;
  several tables share ONE such stream (``table_splits``), whose descriptors name their table.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pyspark.sql import types as T

from seatide.connectors.fake.layout import SplitLayout
from seatide.connectors.fake.options import (DATE_TIME_PARTS, FAKE_OPTIONS, FRACTIONAL_MAX,
                                             INTEGER_BOUNDS)
from seatide.connectors.fake.rows import ExplicitRow, RowValueError, parse_rows
from seatide.connectors.fake.sql import ident
from seatide.connectors.fake.values import ROW_NUMBER, FloatRange, IntRange, ValueExpressions, ValueSettings
from seatide.plugin.base import BatchOffsets, ReadContext, Source, use_python_data_source
from seatide.plugin.registry import register
from seatide.plugin.rowkind import INSERT_ONLY, ROW_KIND_COLUMN, ROW_SEQ_COLUMN, RowKind
from seatide.plugin.schema import Schema, read_schema
from seatide.plugin.tables import TableLayout, TableRows
from seatide.plugin.types import type_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# A full micro-batch holds about this many units, so that it runs as several Spark tasks.
UNITS_PER_BATCH = 4
_ROW = "__fake_row"
_RANGES = "start bigint, stop bigint"

@register
class FakeSource(Source):
    """Generates ``row.num`` rows per parallel reader from ``schema.fields``, or emits the
    explicit ``rows`` from every reader. Values are deterministic: a pure function of the
    field and the global row number, so replays and reruns produce the same rows.
    ``sequence.field`` numbers rows 0..N-1 across all readers and splits."""

    plugin_name = "FakeSource"
    options = FAKE_OPTIONS
    doc = __doc__ or ""

    # -- validation ----------------------------------------------------------------------
    def check(self) -> None:
        self._tables: list[FakeSource] | None = None     # several tables: each one's own source
        if self.opts["tables_configs"] is not None:
            self._tables = self._configured_tables()
            return
        self._check_table()
        if self.opts["table-names"] is not None:
            self._tables = self._named_tables()

    def _configured_tables(self) -> "list[FakeSource]":
        from seatide.plugin.options import OptionError, read_options

        configs = self.opts["tables_configs"]
        if not configs:
            raise self.invalid("tables_configs", "tables_configs is empty: list one FakeSource config per "
                               "table, each with schema { table = \"db.name\", fields { ... } }")
        if self.opts["table-names"] is not None:
            raise self.invalid("table-names", "give tables_configs or table-names, not both")
        tables = []
        for i, config in enumerate(configs):
            where = f"tables_configs[{i}]"
            if not isinstance(config, dict):
                raise self.invalid(where, f"{where} must be a FakeSource config {{ schema {{ ... }}, row.num = ... }}")
            try:
                options = read_options(config, FAKE_OPTIONS, strict=self.check_keys.strict)
                table = FakeSource(options, self.parallelism, self.env)
            except OptionError as exc:
                raise self.invalid(f"{where}.{exc.option}", f"{where}: {exc.message}") from None
            # unknown keys of the table's config warn as the outer ones do, under their full path
            self.notices += [replace(n, key=f"{where}.{n.key}") for n in (*table.notices, *options.unknown)]
            if table._tables is not None:
                raise self.invalid(where, f"{where} holds tables_configs or table-names itself; list its tables "
                                   "in the outer tables_configs")
            if not table._declared.table:
                raise self.invalid(f"{where}.schema.table", f"{where} names no table: give it schema "
                                   "{ table = \"db.name\", ... }, so that sinks can tell the tables apart")
            tables.append(table)
        self._check_distinct([t._declared.table for t in tables], "tables_configs")
        return tables

    def _named_tables(self) -> "list[FakeSource]":
        names = self.opts["table-names"]
        if not names:
            raise self.invalid("table-names", "table-names is empty: list the tables, e.g. [\"test.table1\"]")
        self._check_distinct(names, "table-names")
        tables = []
        for name in names:
            table = FakeSource.__new__(FakeSource)
            table.__dict__.update(self.__dict__)
            table._declared, table._tables = replace(self._declared, table=name), None
            tables.append(table)
        return tables

    def _check_distinct(self, names: list[str], option: str) -> None:
        twice = next((n for n in names if names.count(n) > 1), None)
        if twice is not None:
            raise self.invalid(option, f"{option} names table '{twice}' twice: each table once")

    def _check_table(self) -> None:
        self._declared = read_schema(self.opts, check_keys=self.check_keys)
        if self._declared is None:
            raise self.invalid("schema.fields", "FakeSource needs a schema: schema { fields { id = bigint } } "
                               "or schema { columns = [{ name = id, type = bigint }] }")
        self._schema = self._declared.struct
        for key in ("row.num", "split.read-interval", "map.size", "array.size", "bytes.length",
                    "string.length"):
            self._at_least(key, 0)
        self._at_least("split.num", 1)
        self._settings = ValueSettings(
            integers={name: self._int_range(name, *bounds) for name, bounds in INTEGER_BOUNDS.items()},
            fractions={name: self._float_range(name, high) for name, high in FRACTIONAL_MAX.items()},
            string_length=self.opts["string.length"],
            string_template=self._template("string", self.opts["string.template"]),
            bytes_length=self.opts["bytes.length"],
            array_size=self.opts["array.size"],
            map_size=self.opts["map.size"],
            date_parts={key.split(".")[1]: self._part_template(key, low, high)
                        for key, low, high in DATE_TIME_PARTS},
        )
        self._check_map_keys(self._schema)
        self._rows = self._explicit_rows()
        self._sequence = self._sequence_field()

    def _at_least(self, key: str, low: int) -> None:
        if self.opts[key] < low:
            raise self.invalid(key, f"option '{key}' must be at least {low}, got {self.opts[key]}")

    def _template(self, name: str, values: list | None) -> tuple | None:
        mode_key = f"{name}.fake.mode"
        if self.opts[mode_key] == "template" and not values:
            raise self.invalid(mode_key, f"{mode_key} = template needs {name}.template: "
                               f"give a list of values, e.g. {name}.template = [...]")
        if values is not None and not values:
            raise self.invalid(f"{name}.template", f"{name}.template is empty: give at least one value")
        return tuple(values) if values else None

    def _int_range(self, name: str, low_bound: int, high_bound: int) -> IntRange:
        low, high = self.opts[f"{name}.min"], self.opts[f"{name}.max"]
        for key, value in ((f"{name}.min", low), (f"{name}.max", high)):
            if not low_bound <= value <= high_bound:
                raise self.invalid(key, f"{key} = {value} is out of range for {name} "
                                   f"({low_bound}..{high_bound})")
        if low > high:
            raise self.invalid(f"{name}.min", f"{name}.min ({low}) is greater than {name}.max "
                               f"({high}): make {name}.min <= {name}.max")
        template = self._template(name, self.opts[f"{name}.template"])
        if template:
            template = tuple(self._whole(f"{name}.template", v, low_bound, high_bound) for v in template)
        return IntRange(low, high, template)

    def _float_range(self, name: str, high_bound: float) -> FloatRange:
        low, high = self.opts[f"{name}.min"], self.opts[f"{name}.max"]
        for key, value in ((f"{name}.min", low), (f"{name}.max", high)):
            if not -high_bound <= value <= high_bound:
                raise self.invalid(key, f"{key} = {value} is out of range for {name} "
                                   f"(-{high_bound}..{high_bound})")
        if low > high:
            raise self.invalid(f"{name}.min", f"{name}.min ({low}) is greater than {name}.max "
                               f"({high}): make {name}.min <= {name}.max")
        template = self._template(name, self.opts[f"{name}.template"])
        if template:
            template = tuple(self._number(f"{name}.template", v, high_bound) for v in template)
        return FloatRange(low, high, template)

    def _whole(self, key: str, value, low: int, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.invalid(key, f"{key} holds {value!r}: every value must be a whole number "
                               f"in {low}..{high}")
        return value

    def _number(self, key: str, value, bound: float) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not -bound <= value <= bound:
            raise self.invalid(key, f"{key} holds {value!r}: every value must be a number "
                               f"in -{bound}..{bound}")
        return float(value)

    def _part_template(self, key: str, low: int, high: int) -> tuple[int, ...] | None:
        values = self.opts[key]
        if values is None:
            return None
        if not values:
            raise self.invalid(key, f"{key} is empty: give at least one value in {low}..{high}")
        return tuple(self._whole(key, v, low, high) for v in values)

    def _check_map_keys(self, data_type: T.DataType) -> None:
        if isinstance(data_type, T.StructType):
            for f in data_type.fields:
                self._check_map_keys(f.dataType)
        elif isinstance(data_type, T.ArrayType):
            self._check_map_keys(data_type.elementType)
        elif isinstance(data_type, T.MapType):
            if isinstance(data_type.keyType, (T.NullType, T.MapType)):
                raise self.invalid("schema.fields", f"map<{type_name(data_type.keyType)}, ...> cannot "
                                   "be generated: map keys must not be null or maps")
            self._check_map_keys(data_type.keyType)
            self._check_map_keys(data_type.valueType)

    def _explicit_rows(self) -> list[ExplicitRow] | None:
        rows = self.opts["rows"]
        if rows is None:
            return None
        if not rows:
            raise self.invalid("rows", "rows is empty: list at least one { kind = INSERT, fields = [...] } "
                               "or remove rows to generate data")
        try:
            return parse_rows(rows, self._schema, self.check_keys)
        except RowValueError as exc:
            raise self.invalid("rows", str(exc)) from None

    def _sequence_field(self) -> str | None:
        name = self.opts["sequence.field"]
        if name is None:
            return None
        field = next((f for f in self._schema.fields if f.name == name), None)
        if field is None:
            raise self.invalid("sequence.field", f"sequence.field names '{name}', which is not in "
                               f"schema.fields ({', '.join(self._schema.names)})")
        if not isinstance(field.dataType, T.LongType):
            raise self.invalid("sequence.field", f"sequence.field '{name}' is "
                               f"{type_name(field.dataType)}; it must be a bigint field")
        return name

    # -- contract ----------------------------------------------------------------------
    def _one(self) -> "FakeSource":
        """The source that reads the one table (itself, or its only listed table)."""
        return self._tables[0] if self._tables is not None and len(self._tables) == 1 else self

    def schema(self) -> T.StructType | None:
        one = self._one()
        return None if one._tables is not None else one._schema

    def declared_schema(self) -> Schema | None:
        one = self._one()
        return None if one._tables is not None else one._declared

    def multi_table(self) -> bool:
        return self._tables is not None and len(self._tables) > 1

    def tables(self) -> list[Schema] | None:
        if self.multi_table():
            return [t._declared for t in self._tables]
        return super().tables()

    def table_layout(self, ctx: ReadContext) -> TableLayout:
        return TableLayout.of((t._declared.table, t._schema) for t in self._tables)

    def batch_rows(self, batch, ctx: ReadContext, offsets: BatchOffsets | None = None) -> TableRows:
        """The plain batch: a union of each table's own frame, tagged with a literal (a table is
        read alone). A micro-batch: each table's rows apart (``TableRows.per_table``), made by the
        JVM from the batch's row-number ranges, which are derived from ``offsets`` (the stream's
        own rows, the same ranges, are never read: that would be a Spark job through a Python
        worker per batch)."""
        if not ctx.micro_batch:
            return TableRows(batch, tables=tuple(range(len(self._tables))), separable=True)
        from seatide.connectors.fake.table_splits import batch_units

        if offsets is None:
            raise ValueError("a micro-batch of a FakeSource of several tables is made from its offsets: "
                             "pass the batch's BatchOffsets")
        self._enable_types(ctx.spark)
        layouts = [t.layout(ctx.parallelism, ctx.max_rows_per_batch) for t in self._tables]
        frames, counts = {}, {}
        for i, ranges in sorted(batch_units(layouts, offsets.start, offsets.end).items()):
            numbers = ctx.spark.createDataFrame(ranges, _RANGES)
            frames[i] = self._tables[i].rows_from(
                numbers.selectExpr(f"explode(sequence(start, stop - 1)) AS {ROW_NUMBER}"))
            counts[i] = sum(stop - start for start, stop in ranges)
        return TableRows(None, tables=tuple(frames), separable=True, counts=counts, per_table=frames)

    def row_kinds(self) -> frozenset[RowKind]:
        if self._tables is not None:
            return frozenset().union(*(t.row_kinds() for t in self._tables))
        if self._rows is None:
            return frozenset({RowKind.INSERT})
        return frozenset(row.kind for row in self._rows)

    def layout(self, readers: int, max_rows_per_batch: int) -> SplitLayout:
        rows = len(self._rows) if self._rows is not None else self.opts["row.num"]
        return SplitLayout(readers, rows, self.opts["split.num"],
                           max(1, max_rows_per_batch // UNITS_PER_BATCH))

    def read(self, ctx: ReadContext) -> "DataFrame":
        if self._tables is not None:
            if not self.multi_table():
                return self._one().read(ctx)
            if ctx.micro_batch:
                return self._table_splits(ctx)
            layout = self.table_layout(ctx)
            return layout.union([layout.tagged(t.read(ctx), i) for i, t in enumerate(self._tables)])
        spark = ctx.spark
        self._enable_types(spark)
        layout = self.layout(ctx.parallelism, ctx.max_rows_per_batch)
        numbers = (self._streamed_numbers(ctx, layout) if ctx.micro_batch
                   else self._ranged_numbers(spark, layout))
        return self.rows_from(numbers)

    def planned_rows(self, ctx: ReadContext) -> int | None:
        if ctx.micro_batch:
            return None
        if self._tables is not None:
            return sum(t.planned_rows(ctx) for t in self._tables)
        if self._rows is not None:
            return len(self._rows) * ctx.parallelism
        return self.layout(ctx.parallelism, ctx.max_rows_per_batch).total_rows

    def rows_from(self, numbers: "DataFrame") -> "DataFrame":
        """The source's rows for a DataFrame of global row numbers (column ``__g``)."""
        if self._rows is None:
            values = ValueExpressions(self._settings)
            columns = [f"{self._field_sql(f, values)} AS {ident(f.name)}" for f in self._schema.fields]
            return numbers.selectExpr(*columns, f"CAST(0 AS TINYINT) AS {ident(ROW_KIND_COLUMN)}")
        with_row = numbers.selectExpr(ROW_NUMBER, f"{self._rows_sql()} AS {_ROW}")
        columns = [f"{ROW_NUMBER if f.name == self._sequence else f'{_ROW}.c{i}'} AS {ident(f.name)}"
                   for i, f in enumerate(self._schema.fields)]
        # changes are in row-number order: their __row_seq (plugin.rowkind), which a stream must
        # carry from its source (Spark cannot number a stream's rows)
        seq = [f"CAST({ROW_NUMBER} AS BIGINT) AS {ident(ROW_SEQ_COLUMN)}"] if self.row_kinds() - INSERT_ONLY else []
        return with_row.selectExpr(*columns, f"{_ROW}.kind AS {ident(ROW_KIND_COLUMN)}", *seq)

    def _field_sql(self, field: T.StructField, values: ValueExpressions) -> str:
        return ROW_NUMBER if field.name == self._sequence else values.field(field.dataType, field.name)

    def _rows_sql(self) -> str:
        structs = []
        for row in self._rows:
            parts = [f"'c{i}', {v}" for i, v in enumerate(row.values)]
            parts.append(f"'kind', CAST({int(row.kind)} AS TINYINT)")
            structs.append(f"named_struct({', '.join(parts)})")
        index = f"CAST(pmod({ROW_NUMBER}, {len(self._rows)}L) AS INT) + 1"
        return f"element_at(array({', '.join(structs)}), {index})"

    def _enable_types(self, spark: "SparkSession") -> None:
        if any(_has_time(t._schema) for t in (self._tables or [self])):
            # Spark 4.3 keeps TIME behind a flag; enabling it only allows the type.
            spark.conf.set("spark.sql.timeType.enabled", "true")

    # -- row numbers ---------------------------------------------------------------------
    @staticmethod
    def _ranged_numbers(spark: "SparkSession", layout: SplitLayout) -> "DataFrame":
        # At least one partition per core: values depend only on the row number, so the
        # partitioning is free to follow the machine rather than readers x splits.
        slots = max(layout.readers * layout.splits_per_reader, spark.sparkContext.defaultParallelism)
        partitions = max(1, min(slots, layout.total_rows))
        return spark.range(0, layout.total_rows, 1, numPartitions=partitions).withColumnRenamed("id", ROW_NUMBER)

    def _streamed_numbers(self, ctx: ReadContext, layout: SplitLayout) -> "DataFrame":
        from seatide.connectors.fake.split_stream import SOURCE_NAME, FakeSplitSource, stream_options

        spark = ctx.spark
        use_python_data_source(spark, FakeSplitSource)
        options = stream_options(
            layout, max_rows=ctx.max_rows_per_batch, unbounded=ctx.unbounded,
            interval_ms=self.opts["split.read-interval"],
            partitions=max(layout.readers, spark.sparkContext.defaultParallelism))
        splits = spark.readStream.format(SOURCE_NAME).options(**options).load()
        return splits.selectExpr(f"explode(sequence(start, stop - 1)) AS {ROW_NUMBER}")

    def _table_splits(self, ctx: ReadContext) -> "DataFrame":
        """Several tables, checkpointed: ONE stream of every table's split descriptors
        (``table_splits``), whose batches ``batch_rows`` turns into each table's rows."""
        from seatide.connectors.fake.table_splits import SOURCE_NAME, FakeTableSplits, stream_spec

        use_python_data_source(ctx.spark, FakeTableSplits)
        spec = stream_spec([t.layout(ctx.parallelism, ctx.max_rows_per_batch) for t in self._tables],
                           [t.opts["split.read-interval"] for t in self._tables],
                           max_rows=ctx.max_rows_per_batch, unbounded=ctx.unbounded)
        return ctx.spark.readStream.format(SOURCE_NAME).option("spec", spec).load()


def _has_time(data_type: T.DataType) -> bool:
    if isinstance(data_type, T.TimeType):
        return True
    if isinstance(data_type, T.StructType):
        return any(_has_time(f.dataType) for f in data_type.fields)
    if isinstance(data_type, T.ArrayType):
        return _has_time(data_type.elementType)
    if isinstance(data_type, T.MapType):
        return _has_time(data_type.keyType) or _has_time(data_type.valueType)
    return False


__all__ = ["FakeSource"]
