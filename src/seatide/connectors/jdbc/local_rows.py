"""Rows collected on the driver (a small micro-batch of a multi-table stream, runtime.table_routing),
as one route stages them: with no Spark job, by the driver's own connection (executemany).

``columns`` says which staged column takes which of a row's values, as ``JdbcTarget.rename``
renames a frame; ``values`` makes the rows to insert. Where they are inserted (a temporary table
inside the batch's transaction, or an ordinary one before it) is the target's (target_table.py).
"""

from __future__ import annotations

from seatide.connectors.jdbc.target import JdbcTarget
from seatide.connectors.jdbc.url import POSTGRESQL
from seatide.plugin.rowkind import HIDDEN_COLUMNS, ROW_KIND_COLUMN, ROW_SEQ_COLUMN, RowKind


def columns(route: JdbcTarget, schema) -> "list[tuple[str, list[int]]] | None":
    """Each staged column with the positions of the values it takes in a row of ``schema``, the
    first that is not null (a column the source renamed holds its old name's values in older
    rows). None when a value needs Spark's own staging (``Dialect.staged_value``: arrays; nested
    types) or rows go through the user's query."""
    if route.table is None or not all(_plain(f.dataType, route.dialect.name) for f in schema.fields
                                      if f.name not in HIDDEN_COLUMNS):
        return None
    positions = {route.column(f.name): [i] for i, f in enumerate(schema.fields) if f.name not in HIDDEN_COLUMNS}
    if route.behaviour is not None and route.target_columns:
        for new, old in route.renames_in(schema).items():
            if old in positions:
                positions[new] = positions.get(new, []) + positions.pop(old)
        kept = set(route.target_columns.values())
        positions = {c: p for c, p in positions.items() if c in kept}
    return list(positions.items())


def values(route: JdbcTarget, rows: list[tuple], schema) -> tuple[list[str], list[tuple]]:
    """(the staged columns, kind and sequence included for a keyed sink; the rows to insert)."""
    from psycopg.types.numeric import Float4
    from pyspark.sql import types as T

    staged = columns(route, schema)
    names = [f.name for f in schema.fields]
    keyed = bool(route.spec.primary_keys)
    # Spark hands a TIMESTAMP (an instant) to Python as the local wall-clock time: with its
    # zone, PostgreSQL stores the instant its JDBC writer would (MySQL's client drops the zone).
    zoned = {i for i, f in enumerate(schema.fields) if isinstance(f.dataType, T.TimestampType)}
    # Spark binds a FLOAT as 4 bytes, which PostgreSQL casts to the column (float4 0.1 is 0.1 as
    # NUMERIC, its widened double as DOUBLE PRECISION); Python holds it widened to a double
    # (0.10000000149011612), which a NUMERIC column would keep as such. (MySQL's are left to
    # Spark: _plain.)
    floats = {i for i, f in enumerate(schema.fields) if isinstance(f.dataType, T.FloatType)}
    kind_at = names.index(ROW_KIND_COLUMN) if ROW_KIND_COLUMN in names else None
    seq_at = names.index(ROW_SEQ_COLUMN) if ROW_SEQ_COLUMN in names else None

    def value(row: tuple, at: list[int]):
        found = next((row[i] for i in at if row[i] is not None), None)
        if found is None:
            return None
        if at[0] in zoned:
            return found.astimezone()
        # a renamed column's old and new fields meet in Spark's coalesce, FLOAT only if both are
        return Float4(found) if floats.issuperset(at) else found

    out = []
    for place, row in enumerate(rows):
        one = [value(row, at) for _, at in staged]
        if keyed:    # without a sequence the rows are in the source's order (target._source_order)
            one += [int(RowKind.INSERT) if kind_at is None else int(row[kind_at]),
                    place if seq_at is None else int(row[seq_at])]
        out.append(tuple(one))
    return [c for c, _ in staged], out


def _plain(data_type, dialect: str) -> bool:
    """A type whose Python value Spark collects is what the database client binds as it is. Not
    a FLOAT on MySQL: Connector/J sends Java's ``Float.toString``, which before Java 19 often
    has more digits than the shortest decimal (351914784f is sent as 3.51914784E8, its shortest
    decimal 351914780): only Spark's own writer stores what Spark's writer stores."""
    from pyspark.sql import types as T

    if dialect != POSTGRESQL and isinstance(data_type, T.FloatType):
        return False

    plain = (T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
             T.DecimalType, T.StringType, T.BinaryType, T.DateType, T.TimestampType, T.TimestampNTZType)
    return isinstance(data_type, plain) or type(data_type).__name__ == "TimeType"


__all__ = ["columns", "values"]
