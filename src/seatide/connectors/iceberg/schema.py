"""Spark's types <-> Iceberg's, for creating tables, evolving them and writing their files.

Spark writes the data files (parquet, without field ids); a table SeaTide writes carries
Iceberg's default name mapping (``schema.name-mapping.default``), which tells every Iceberg
reader which file column is which field, as pyiceberg's ``add_files`` does.

Types (SeaTunnel's mapping): boolean, int (tinyint and smallint widen to it), bigint -> long,
float, double, decimal, date, timestamp -> timestamptz (Spark's TIMESTAMP is an instant),
timestamp_ntz -> timestamp, string, binary, struct, array -> list, map. Iceberg's time, uuid
and fixed have no Spark type: a table holding them is refused with the column's name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType


class UnsupportedIcebergType(ValueError):
    pass


def arrow_schema(struct: "StructType"):
    """The pyarrow schema of a Spark row type (what pyiceberg creates and evolves tables from)."""
    import pyarrow as pa

    return pa.schema([pa.field(f.name, _arrow_type(f.dataType), nullable=True) for f in struct.fields])


def _arrow_type(kind: "DataType"):
    import pyarrow as pa
    from pyspark.sql import types as T

    if isinstance(kind, T.StructType):
        return pa.struct([pa.field(f.name, _arrow_type(f.dataType), nullable=True) for f in kind.fields])
    if isinstance(kind, T.ArrayType):
        return pa.list_(pa.field("element", _arrow_type(kind.elementType), nullable=True))
    if isinstance(kind, T.MapType):
        return pa.map_(_arrow_type(kind.keyType), _arrow_type(kind.valueType))
    simple = {
        T.BooleanType: pa.bool_(), T.ByteType: pa.int32(), T.ShortType: pa.int32(), T.IntegerType: pa.int32(),
        T.LongType: pa.int64(), T.FloatType: pa.float32(), T.DoubleType: pa.float64(), T.StringType: pa.large_string(),
        T.BinaryType: pa.large_binary(), T.DateType: pa.date32(), T.TimestampType: pa.timestamp("us", tz="UTC"),
        T.TimestampNTZType: pa.timestamp("us"), T.NullType: pa.large_string(),
    }
    for cls, arrow in simple.items():
        if isinstance(kind, cls):
            return arrow
    if isinstance(kind, T.DecimalType):
        return pa.decimal128(kind.precision, kind.scale)
    if isinstance(kind, T.CharType) or isinstance(kind, T.VarcharType):
        return pa.large_string()
    raise UnsupportedIcebergType(f"Spark type {kind.simpleString()} has no Iceberg type")


def spark_type(iceberg_type, where: str) -> str:
    """The Spark SQL type (DDL text) a column of ``iceberg_type`` is written and read as."""
    from pyiceberg import types as I

    if isinstance(iceberg_type, I.StructType):
        inner = ", ".join(f"`{f.name.replace('`', '``')}`: {spark_type(f.field_type, f'{where}.{f.name}')}"
                          for f in iceberg_type.fields)
        return f"struct<{inner}>"
    if isinstance(iceberg_type, I.ListType):
        return f"array<{spark_type(iceberg_type.element_type, where + '.element')}>"
    if isinstance(iceberg_type, I.MapType):
        return (f"map<{spark_type(iceberg_type.key_type, where + '.key')}, "
                f"{spark_type(iceberg_type.value_type, where + '.value')}>")
    if isinstance(iceberg_type, I.DecimalType):
        return f"decimal({iceberg_type.precision},{iceberg_type.scale})"
    simple = {I.BooleanType: "boolean", I.IntegerType: "int", I.LongType: "bigint", I.FloatType: "float",
              I.DoubleType: "double", I.DateType: "date", I.TimestampType: "timestamp_ntz",
              I.TimestamptzType: "timestamp", I.StringType: "string", I.BinaryType: "binary"}
    for cls, name in simple.items():
        if isinstance(iceberg_type, cls):
            return name
    raise UnsupportedIcebergType(f"column {where} has Iceberg type {iceberg_type}, which SeaTide cannot "
                                 "write or read (no Spark type holds it exactly)")


def spark_struct(schema) -> "StructType":
    """The Spark row type of an Iceberg schema (pyiceberg ``Schema``)."""
    from pyspark.sql.types import StructType

    ddl = ", ".join(f"`{f.name.replace('`', '``')}` {spark_type(f.field_type, f.name)}" for f in schema.fields)
    return StructType.fromDDL(ddl) if ddl else StructType([])


def new_table_schema(struct: "StructType", primary_keys: list[str], next_id=None, format_version: int = 2):
    """A fresh Iceberg schema for ``struct``, the keys (if any) required identifier fields; field
    ids from 1, or from ``next_id()`` (a table replaced in place keeps its old ids unused)."""
    from pyiceberg.catalog import Catalog
    from pyiceberg.schema import Schema, assign_fresh_schema_ids
    from pyiceberg.types import NestedField

    plain = assign_fresh_schema_ids(Catalog._convert_schema_if_needed(arrow_schema(struct), format_version), next_id)
    if not primary_keys:
        return plain
    ids = []
    fields = []
    for field in plain.fields:
        if field.name in primary_keys:
            ids.append(field.field_id)
            field = NestedField(field.field_id, field.name, field.field_type, required=True, doc=field.doc)
        fields.append(field)
    return Schema(*fields, schema_id=plain.schema_id, identifier_field_ids=ids)


__all__ = ["UnsupportedIcebergType", "arrow_schema", "new_table_schema", "spark_struct", "spark_type"]
