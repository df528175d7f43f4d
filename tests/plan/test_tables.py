"""The tagged layout of multi-table rows (plugin/tables.py): a table is read back out of a union
without reading the others, and Python readers' Arrow batches are tagged into the same shape."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.plugin.tables import TABLE_COLUMN, TableLayout, struct_column

pytestmark = pytest.mark.spark

ORDERS = T.StructType([T.StructField("id", T.LongType()), T.StructField("item", T.StringType(), True,
                                                                        {"seatide.source_type": "varchar(40)"})])
CUSTOMERS = T.StructType([T.StructField("id", T.LongType()), T.StructField("born", T.DateType())])


def layout() -> TableLayout:
    return TableLayout.of([("shop.orders", ORDERS), ("shop.customers", CUSTOMERS)])


def test_a_table_read_out_of_the_union_reads_only_that_table(spark):
    tables = layout()
    orders = spark.range(0, 5).selectExpr("id", "cast(id as string) as item", "cast(0 as tinyint) as __row_kind")
    customers = spark.range(100, 103).selectExpr("id", "date'2024-01-01' as born")
    union = tables.union([tables.tagged(orders, 0), tables.tagged(customers, 1)])
    assert union.schema.simpleString() == tables.spark_schema().simpleString()
    back = tables.table_frame(union, 1)
    assert [tuple(r) for r in back.orderBy("id").collect()] == [(i, dt.date(2024, 1, 1), 0)
                                                                 for i in range(100, 103)]
    plan = back._jdf.queryExecution().optimizedPlan().toString()
    assert "Range (0, 5" not in plan and "Range (100, 103" in plan      # the other child is pruned
    # field metadata (the column type a sink creates) survives the trip
    assert tables.table_frame(union, 0).schema["item"].metadata == {"seatide.source_type": "varchar(40)"}


def test_a_readers_arrow_batch_is_tagged_with_nulls_for_the_other_tables(spark):
    tables = layout().prepare_arrow()
    batch = pa.RecordBatch.from_arrays([pa.array([1, 2], pa.int64()), pa.array(["a", None]),
                                        pa.array([0, 2], pa.int8())], names=["id", "item", ROW_KIND_COLUMN])
    tagged = tables.tag(batch, 0)
    assert tagged.schema.names == [TABLE_COLUMN, ROW_KIND_COLUMN, struct_column(0), struct_column(1)]
    assert tagged.column(0).to_pylist() == [0, 0]
    assert tagged.column(2).to_pylist() == [{"id": 1, "item": "a"}, {"id": 2, "item": None}]
    assert tagged.column(3).null_count == 2
    restored = TableLayout.from_json(tables.to_json())
    assert restored.names == tables.names and restored.structs == tables.structs


def test_a_table_a_batch_read_apart_does_not_hold_is_an_empty_frame_of_its_exact_fields(spark):
    """The empty frame is made in the JVM (not by createDataFrame): its fields, their nullability and
    metadata (the column type a sink creates a table with) are the table's, then ``__row_kind``."""
    from seatide.plugin.tables import TableRows

    tables = layout()
    held = spark.range(0, 2).selectExpr("id", "cast(id as string) as item", "cast(0 as tinyint) as __row_kind")
    empty = tables.rows_of(TableRows(None, per_table={0: held}), 1, spark)
    assert empty.schema == T.StructType([*CUSTOMERS.fields, T.StructField(ROW_KIND_COLUMN, T.ByteType(), True)])
    assert empty.count() == 0
    orders = tables.rows_of(TableRows(None, per_table={}), 0, spark)
    assert orders.schema["item"].metadata == {"seatide.source_type": "varchar(40)"}
    assert orders.schema.fieldNames() == ["id", "item", ROW_KIND_COLUMN]
