"""Changes between two shapes of a table (plugin/evolution.py): by column id where the database
has one, else by name and position; and which type changes widen."""

from __future__ import annotations

from pyspark.sql import types as T

from seatide.plugin.evolution import (ADD, COLUMN_ID, DROP, RENAME, RETIRED, RETYPE, changes_between, widens,
                                      with_retired)
from seatide.plugin.types import SOURCE_TYPE


def field(name, data_type, declared=None, column_id=None, retired=False):
    meta = {**({SOURCE_TYPE: declared} if declared else {}), **({COLUMN_ID: column_id} if column_id else {}),
            **({RETIRED: True} if retired else {})}
    return T.StructField(name, data_type, True, meta)


def kinds(changes):
    return [(c.kind, c.column, c.new_name) for c in changes]


def test_changes_by_name_and_position_take_a_column_dropped_and_added_in_its_place_for_a_rename():
    before = T.StructType([field("id", T.IntegerType()), field("qty", T.IntegerType()), field("name", T.StringType())])
    after = T.StructType([field("id", T.LongType()), field("quantity", T.IntegerType()), field("note", T.DateType())])
    assert kinds(changes_between("t", before, after)) == [
        (RETYPE, "id", None), (RENAME, "qty", "quantity"), (ADD, "note", None), (DROP, "name", None)]
    # without ids, a column of the same type in the place of a dropped one reads as its rename
    same_type = T.StructType([*after.fields[:2], field("note", T.StringType())])
    assert kinds(changes_between("t", before, same_type))[-1] == (RENAME, "name", "note")


def test_changes_by_column_id_follow_a_renamed_column_wherever_it_moved():
    before = T.StructType([field("a", T.IntegerType(), column_id=1), field("b", T.StringType(), column_id=2)])
    after = T.StructType([field("b2", T.StringType(), column_id=2), field("c", T.IntegerType(), column_id=3)])
    assert kinds(changes_between("t", before, after)) == [(RENAME, "b", "b2"), (ADD, "c", None), (DROP, "a", None)]


def test_retired_columns_are_neither_compared_nor_dropped_again_and_stay_retired():
    before = T.StructType([field("id", T.IntegerType()), field("gone", T.StringType(), retired=True)])
    after = T.StructType([field("id", T.IntegerType())])
    assert changes_between("t", before, after) == []
    kept = with_retired(before, after)
    assert kept.names == ["id", "gone"] and kept["gone"].metadata[RETIRED]


def test_widening_types():
    assert widens(field("c", T.IntegerType()), field("c", T.LongType()))
    assert not widens(field("c", T.LongType()), field("c", T.IntegerType()))
    assert widens(field("c", T.DecimalType(8, 2)), field("c", T.DecimalType(12, 3)))
    assert not widens(field("c", T.DecimalType(8, 2)), field("c", T.DecimalType(8, 3)))
    assert widens(field("c", T.FloatType()), field("c", T.DoubleType()))
    assert widens(field("c", T.StringType(), "varchar(10)"), field("c", T.StringType(), "varchar(20)"))
    assert not widens(field("c", T.StringType(), "varchar(20)"), field("c", T.StringType(), "varchar(10)"))
    assert not widens(field("c", T.IntegerType()), field("c", T.StringType()))
