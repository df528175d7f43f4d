"""Spark's row types <-> a Paimon table's, through Arrow (pypaimon speaks pyarrow).

SeaTunnel's types map one to one: tinyint, smallint, int, bigint, float, double, decimal, boolean,
string, bytes, date, timestamp (TIMESTAMP(6), no zone) and timestamp_tz (TIMESTAMP_LTZ(6)), arrays,
maps and rows. A Paimon type Spark has no type for (TIME) is refused with the column's name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from seatide.connectors.paimon.warehouse import PaimonError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType


def arrow_schema(struct: "StructType", keys: list[str] = ()) -> "pa.Schema":
    """The Arrow schema a table for ``struct`` is created from (key columns NOT NULL, as Paimon wants)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(struct, timezone="UTC")
    return pa.schema([field.with_nullable(field.name not in keys) for field in schema])


def spark_struct(table_schema: "pa.Schema", where: str) -> "StructType":
    """The Spark row type a table (as pypaimon's Arrow schema) is read as."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    for field in table_schema:
        if pa.types.is_time(field.type):
            raise PaimonError(f"Paimon source: column {field.name} of {where} is {field.type}; Spark has no "
                              "time type to read it as")
    return from_arrow_schema(pa.schema([f.with_nullable(True) for f in table_schema]), prefer_timestamp_ntz=True)


def table_arrow_schema(table) -> "pa.Schema":
    """A pypaimon table's columns as Arrow (what its writer takes)."""
    from pypaimon.schema.data_types import PyarrowFieldParser

    return PyarrowFieldParser.from_paimon_schema(table.table_schema.fields)


def conform(data: "pa.Table", target: "pa.Schema", where: str, case_sensitive: bool = False) -> "pa.Table":
    """``data``'s columns as ``target``'s: found by name (any case unless ``case_sensitive``), cast to
    its types, in its order; a column the input lacks is null. Raises naming a column that cannot be cast."""
    import pyarrow as pa

    fold = (lambda s: s) if case_sensitive else str.lower
    names = {fold(n): n for n in data.column_names}
    columns = []
    for field in target:
        source = names.get(fold(field.name))
        if source is None:
            if not field.nullable:
                raise PaimonError(f"Paimon sink: {where} has key column {field.name}, which the input lacks "
                                  f"(fields: {', '.join(data.column_names)})")
            columns.append(pa.nulls(data.num_rows, field.type))
            continue
        column = data.column(source)
        try:
            columns.append(column if column.type == field.type else column.cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise PaimonError(f"Paimon sink: field {source} ({column.type}) cannot be written to column "
                              f"{field.name} ({field.type}) of {where}: {exc}") from None
    return pa.Table.from_arrays(columns, schema=pa.schema([f.with_nullable(True) for f in target]))


def extra_fields(struct: "StructType", table_schema: "pa.Schema", case_sensitive: bool = False) -> list:
    """The input's fields the table has no column for (schema evolution adds them)."""
    fold = (lambda s: s) if case_sensitive else str.lower
    known = {fold(f.name) for f in table_schema}
    return [f for f in struct.fields if fold(f.name) not in known]


__all__ = ["arrow_schema", "conform", "extra_fields", "spark_struct", "table_arrow_schema"]
