"""Rows of several tables in one DataFrame: how a multi-table source tags its rows.

A source that reads several tables (``table-names`` of a CDC source, ``table_list`` of a Jdbc
source, ``tables_configs`` of FakeSource) returns one DataFrame of this shape::

    __seatide_table   int        the table's index in the source's list (``TableLayout.names``)
    __row_kind        tinyint    as for every source
    __row_seq         bigint     only from a source that numbers its changes (plugin.rowkind)
    __seatide_t0      struct     table 0's fields; null in rows of other tables
    ...
    __seatide_tN      struct     table N's fields

Each table keeps its field names, types and metadata inside its struct. A Python reader tags
its per-table Arrow batches with ``TableLayout.tag`` (the other tables' structs are all-null
arrays: a validity bit per row); a source that builds rows with Spark unions per-table frames
tagged with a literal index (``TableLayout.tagged``), so that filtering one table out of the
union reads only that table (Spark prunes the other children). ``TableLayout.table_frame``
takes one table's rows back out, as a sink writes them. A source whose tables are read apart
anyway (the Jdbc source) gives them apart instead (``TableRows.per_table``): Spark analyses a
union whole for every table taken out of it. See docs/design/multi-table.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from seatide.plugin.rowkind import ROW_KIND_COLUMN, ROW_SEQ_COLUMN, hidden_fields
from seatide.plugin.types import quote_field

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

TABLE_COLUMN = "__seatide_table"
_STRUCT = "__seatide_t"


def struct_column(index: int) -> str:
    """The column holding table ``index``'s fields."""
    return f"{_STRUCT}{index}"


@dataclass(frozen=True)
class TableLayout:
    """The tables of one multi-table source, in tag order."""

    names: tuple[str, ...]                 # each table's full name (database.schema.table)
    schemas_json: tuple[str, ...]          # each table's StructType (fields, no row kind) as JSON

    @classmethod
    def of(cls, tables: Iterable[tuple[str, "StructType"]]) -> "TableLayout":
        names, schemas = [], []
        for name, schema in tables:
            names.append(name)
            schemas.append(schema.json())
        return cls(tuple(names), tuple(schemas))

    # -- Spark (the driver) -------------------------------------------------------------------
    @cached_property
    def structs(self) -> tuple["StructType", ...]:
        from pyspark.sql.types import StructType

        return tuple(StructType.fromJson(json.loads(text)) for text in self.schemas_json)

    def spark_schema(self, sequenced: bool = False) -> "StructType":
        """The tagged shape; ``sequenced``: the source writes ``__row_seq`` into its rows (``tag``)."""
        from pyspark.sql import types as T

        return T.StructType([T.StructField(TABLE_COLUMN, T.IntegerType(), True), *hidden_fields(sequenced),
                             *[T.StructField(struct_column(i), s, True) for i, s in enumerate(self.structs)]])

    def tagged(self, df: "DataFrame", index: int) -> "DataFrame":
        """A frame of table ``index`` (its fields and ``__row_kind``) in the tagged shape."""
        from pyspark.sql import functions as F

        fields = [F.col(quote_field(f.name)) for f in self.structs[index].fields]
        kind = F.col(ROW_KIND_COLUMN) if ROW_KIND_COLUMN in df.columns else F.lit(0)
        columns = [F.lit(index).cast("int").alias(TABLE_COLUMN), kind.cast("tinyint").alias(ROW_KIND_COLUMN)]
        for i, struct in enumerate(self.structs):
            value = F.struct(*fields) if i == index else F.lit(None)
            columns.append(value.cast(struct).alias(struct_column(i)))
        return df.select(*columns)

    def union(self, frames: list["DataFrame"]) -> "DataFrame":
        """The per-table ``tagged`` frames as one frame (UNION ALL, in table order)."""
        result = frames[0]
        for frame in frames[1:]:
            result = result.unionByName(frame)
        return result

    def table_frame(self, df: "DataFrame", index: int) -> "DataFrame":
        """Table ``index``'s rows of a tagged frame: its fields (with their metadata), ``__row_kind``
        and, when the source wrote it, ``__row_seq``."""
        from pyspark.sql import functions as F

        struct = struct_column(index)
        fields = [F.col(f"{struct}.{quote_field(f.name)}").alias(f.name, metadata=f.metadata)
                  for f in self.structs[index].fields]
        hidden = [F.col(c) for c in (ROW_KIND_COLUMN, ROW_SEQ_COLUMN) if c in df.columns]
        return df.where(F.col(TABLE_COLUMN) == index).select(*fields, *hidden)

    def rows_of(self, rows: "TableRows", index: int, spark) -> "DataFrame":
        """Table ``index``'s rows of a batch, as ``table_frame`` gives them: from the tables the
        source kept apart when it did (none in the batch: an empty frame of the table's fields),
        else out of the tagged frame."""
        if rows.per_table is None:
            return self.table_frame(rows.frame, index)
        if index in rows.per_table:
            return rows.per_table[index]
        from pyspark.sql import DataFrame
        from pyspark.sql import types as T

        fields = T.StructType([*self.structs[index].fields, T.StructField(ROW_KIND_COLUMN, T.ByteType(), True)])
        # Made in the JVM (a LocalRelation): ``spark.createDataFrame([], fields)`` costs 11-26 ms in
        # Python, and a whole-database job asks it for every table a micro-batch does not hold (75
        # of 100 at a checkpointed snapshot's first batch: ≈1 s before its first table stages).
        session = spark._jsparkSession
        return DataFrame(session.createDataFrame(spark._jvm.java.util.ArrayList(),
                                                 session.parseDataType(fields.json())), spark)

    # -- Arrow (Python readers, wherever they run) --------------------------------------------
    @cached_property
    def arrow_structs(self) -> tuple["pa.DataType", ...]:
        """Each table's struct as Arrow types Spark expects (made where the layout is made and
        pickled with it: computing them imports pandas, which a Python worker should not pay)."""
        from pyspark.sql.pandas.types import to_arrow_type

        return tuple(to_arrow_type(s, timezone="UTC") for s in self.structs)

    def prepare_arrow(self) -> "TableLayout":
        """Compute ``arrow_structs`` now (before the layout is pickled to the workers)."""
        _ = self.arrow_structs
        return self

    def tag(self, batch: "pa.RecordBatch", index: int) -> "pa.RecordBatch":
        """A record batch of table ``index`` (its fields, then ``__row_kind`` and, from a source that
        numbers its changes, ``__row_seq``) in the tagged shape."""
        import pyarrow as pa

        rows = batch.num_rows
        struct_type = self.arrow_structs[index]
        own = pa.StructArray.from_arrays(
            [_as_type(batch.column(f.name), f.type) for f in struct_type], fields=list(struct_type))
        arrays = [pa.array([index] * rows, pa.int32()), batch.column(ROW_KIND_COLUMN).cast(pa.int8())]
        names = [TABLE_COLUMN, ROW_KIND_COLUMN]
        if ROW_SEQ_COLUMN in batch.schema.names:
            arrays.append(batch.column(ROW_SEQ_COLUMN).cast(pa.int64()))
            names.append(ROW_SEQ_COLUMN)
        arrays += [own if i == index else pa.nulls(rows, t) for i, t in enumerate(self.arrow_structs)]
        names += [struct_column(i) for i in range(len(self.names))]
        return pa.RecordBatch.from_arrays(arrays, names=names)

    # -- travel ---------------------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps({"names": list(self.names), "schemas": list(self.schemas_json)})

    @classmethod
    def from_json(cls, text: str) -> "TableLayout":
        data = json.loads(text)
        return cls(tuple(data["names"]), tuple(data["schemas"]))



def _as_type(array, wanted):
    return array if array.type == wanted else array.cast(wanted)


@dataclass(frozen=True)
class TableRoute:
    """Where a sink writes one table of a multi-table input."""

    index: int             # the table's tag in the source (``TableLayout.names``)
    name: str              # the source table's full name
    catalog: object        # plugin.schema.Schema: the table as the sink receives it (after transforms)
    sink: object           # plugin.base.Sink built for this table, its options filled from ``catalog``

    @property
    def key(self) -> str:
        """A short name for the route that stays the same when tables are added or reordered."""
        import hashlib

        return "t" + hashlib.sha1(self.name.encode()).hexdigest()[:10]


@dataclass
class TableFrames:
    """What a multi-table sink's targets get for one batch: each table's rows (its fields and
    ``__row_kind``, after the transforms), by route index. Tables without rows in the batch are
    left out, except in a plain batch, where every table is given."""

    frames: "Mapping[int, DataFrame]"
    counts: dict[int, int] = field(default_factory=dict)     # rows per table before transforms, when known
    # The fields a table's rows have as the sink gets them, for any route index (a table without
    # rows in the batch too: its save modes are made before the first batch).
    schema_of: "Callable[[int], StructType] | None" = None
    # A small batch's rows, collected on the driver in one Spark job (runtime.table_routing), by
    # route index: tuples of ``schema_of(index)``'s values in the batch's order. None: not
    # collected (a large batch, or transforms before the sink); read ``frames``, a mapping that
    # builds a table's frame only when asked for it.
    local: "dict[int, list[tuple]] | None" = None


@dataclass
class TableRows:
    """The rows of one micro-batch (or of a plain batch) of a multi-table source.

    ``frame`` is in the tagged shape. ``tables``: the indexes that may have rows (None: unknown,
    the runtime counts them). ``separable``: filtering one table out of ``frame`` reads only that
    table (a union of per-table frames); when False the runtime persists the batch before
    taking tables out of it, so the source is read once.

    ``per_table``: each table's rows apart (its fields and ``__row_kind``), from a source that
    reads its tables apart (the Jdbc source); ``frame`` is then None. Taking a table out of a
    union of every table costs Spark an analysis of the whole union for each table, and again
    when it plans the table's write: at 100 tables, minutes before the first row moved."""

    frame: "DataFrame | None"
    tables: tuple[int, ...] | None = None
    separable: bool = False
    counts: dict[int, int] = field(default_factory=dict)     # rows per table, when counted
    per_table: "dict[int, DataFrame] | None" = None
    # A small micro-batch collected on the driver by the runtime (runtime.table_routing): each
    # table's rows of ``frame`` (Spark Rows of the tagged shape), in the batch's order.
    local: "dict[int, list] | None" = None
    # About how many bytes the batch's values take, when the source knows it from its own stream
    # (Postgres-CDC: its changes' messages); None: the runtime measures the batch before it
    # collects it on the driver. ``least_bytes``: what the source knows they take at least, and
    # ``row_bytes`` about how many one row takes (the runtime sizes the batch's cache by it).
    bytes: int | None = None
    least_bytes: int = 0
    row_bytes: int | None = None


def table_frames_of(frames) -> TableFrames:
    """A batch's rows as ``TableFrames``: a plain DataFrame is route 0's."""
    if isinstance(frames, TableFrames):
        return frames
    return TableFrames({0: frames}, schema_of=lambda _index: frames.schema)


def with_empty_frame(frames: TableFrames, index: int) -> TableFrames:
    """``frames`` with an empty frame of route ``index``'s fields (a single table without rows)."""
    from pyspark.sql import SparkSession

    empty = SparkSession.getActiveSession().createDataFrame([], frames.schema_of(index))
    return replace(frames, frames={**frames.frames, index: empty})


def routes_of(sink, routes: list[TableRoute] | None) -> list[TableRoute]:
    """A multi-table input's routes, or the single table's route of length one (``sink``: a ``plugin.base.Sink``)."""
    if routes:
        return routes
    name = sink.catalog.table if sink.catalog is not None and sink.catalog.table else ""
    return [TableRoute(0, name, sink.catalog, sink)]


__all__ = ["TABLE_COLUMN", "TableFrames", "TableLayout", "TableRoute", "TableRows", "routes_of", "struct_column",
           "table_frames_of", "with_empty_frame"]
