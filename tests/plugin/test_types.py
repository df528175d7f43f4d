"""SeaTunnel's type grammar and schema block: every form the doc allows, and clear refusals."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from seatide.plugin.options import KeyCheck, OptionError, read_options
from seatide.plugin.schema import ConstraintKey, PrimaryKey, read_schema, schema_options
from seatide.plugin.types import SchemaError, parse_type, same_type, type_name

ROW = T.StructType([T.StructField("c_int", T.IntegerType()), T.StructField("c_string", T.StringType()),
                    T.StructField("c_row", T.StructType([T.StructField("c_int", T.IntegerType())]))])


@pytest.mark.parametrize("spec, expected", [
    ("string", T.StringType()), ("BOOLEAN", T.BooleanType()), ("tinyint", T.ByteType()),
    ("smallint", T.ShortType()), ("Int", T.IntegerType()), ("bigint", T.LongType()),
    ("float", T.FloatType()), ("double", T.DoubleType()), ("bytes", T.BinaryType()),
    ("date", T.DateType()), ("time", T.TimeType(6)), ("timestamp", T.TimestampNTZType()),
    ("timestamp_tz", T.TimestampType()), ("null", T.NullType()), (" bigint ", T.LongType()),
    ("int(11)", T.IntegerType()), ("tinyint(3)", T.ByteType()), ("varchar(255)", T.StringType()),
])
def test_simple_types_case_insensitive_with_display_lengths(spec, expected):
    assert parse_type(spec) == expected


@pytest.mark.parametrize("spec, precision, scale", [
    ("decimal(10,2)", 10, 2), ("decimal(10, 2)", 10, 2), ("DECIMAL( 10 , 2 )", 10, 2),
    ("decimal (38, 18)", 38, 18), ("decimal(38,0)", 38, 0), ("decimal(38, 38)", 38, 38),
    ("decimal(2, 1)", 2, 1), ("decimal(5)", 5, 0),
])
def test_decimal_any_spacing_up_to_precision_38(spec, precision, scale):
    assert parse_type(spec) == T.DecimalType(precision, scale)


@pytest.mark.parametrize("spec, expected", [
    ("array<int>", T.ArrayType(T.IntegerType())),
    ("ARRAY < string >", T.ArrayType(T.StringType())),
    ("array<decimal(38, 18)>", T.ArrayType(T.DecimalType(38, 18))),
    ("map<string,int>", T.MapType(T.StringType(), T.IntegerType())),
    ("map< string , decimal( 20 , 4 ) >", T.MapType(T.StringType(), T.DecimalType(20, 4))),
    ("map<string, array<map<int, time>>>",
     T.MapType(T.StringType(), T.ArrayType(T.MapType(T.IntegerType(), T.TimeType(6))))),
    ("map<decimal(10,2), timestamp>", T.MapType(T.DecimalType(10, 2), T.TimestampNTZType())),
])
def test_array_and_map_however_spaced_and_nested(spec, expected):
    assert parse_type(spec) == expected


def test_rows_as_objects_hocon_strings_json_strings_and_inside_generics():
    hocon_map = "map<string, {c_int = int, c_string = string, c_row = {c_int = int}}>"
    json_map = 'map<string, {"c_int":"int", "c_string":"string", "c_row":{"c_int":"int"}}>'
    assert parse_type(hocon_map) == T.MapType(T.StringType(), ROW)
    assert parse_type(json_map) == T.MapType(T.StringType(), ROW)
    assert parse_type({"c_int": "int", "c_string": "string", "c_row": {"c_int": "int"}}) == ROW
    assert parse_type("{c_int = int, c_string = string, c_row = {c_int = int}}") == ROW
    assert parse_type("array<{a = \"decimal(10, 2)\", b = \"map<string, int>\"}>") == T.ArrayType(T.StructType([
        T.StructField("a", T.DecimalType(10, 2)), T.StructField("b", T.MapType(T.StringType(), T.IntegerType()))]))
    assert parse_type("row<c_int int, c_string string, c_row row<c_int int>>") == ROW


def test_type_name_spells_decimals_in_full():
    assert type_name(T.DecimalType(38, 18)) == "decimal(38,18)"
    assert type_name(T.MapType(T.StringType(), T.DecimalType(2, 1))) == "map<string, decimal(2,1)>"


def test_type_name_round_trips_through_the_parser():
    for data_type in (ROW, T.MapType(T.StringType(), ROW), T.ArrayType(T.DecimalType(38, 18)), T.TimeType(6),
                      T.MapType(T.StringType(), T.ArrayType(T.TimestampNTZType()))):
        assert parse_type(type_name(data_type)) == data_type


@pytest.mark.parametrize("spec, words", [
    ("decimal(39, 2)", "precision 1..38"), ("decimal(5, 6)", "scale 0..precision"),
    ("integr", "unknown type 'integr'"), ("map<string>", "needs a key and a value"),
    ("map<string, intt>", "unknown type 'intt'"), ("{a = bigintt}", "field 'a': unknown type 'bigintt'"),
    ("{a = ", "not an object of fields"), ("row<a>", "each row field is 'name type'"), (5, "must be a name"),
])
def test_bad_types_name_what_is_wrong(spec, words):
    with pytest.raises(SchemaError, match=None) as info:
        parse_type(spec)
    assert words in str(info.value)


def test_same_type_ignores_nullability_but_not_names_or_types():
    loose = T.MapType(T.StringType(), T.StringType(), valueContainsNull=True)
    strict = T.MapType(T.StringType(), T.StringType(), valueContainsNull=False)
    assert loose != strict and same_type(strict, loose)
    row_a = T.StructType([T.StructField("a", T.IntegerType(), False), T.StructField("b", T.ArrayType(T.LongType(), False))])
    assert same_type(row_a, parse_type("{a = int, b = \"array<bigint>\"}"))
    assert not same_type(row_a, parse_type("{b = int, a = \"array<bigint>\"}"))
    assert not same_type(row_a, parse_type("{a = bigint, b = \"array<bigint>\"}"))
    assert same_type(T.DecimalType(5, 2), T.DecimalType(10, 2)) and not same_type(T.DecimalType(5, 2), T.DecimalType(10, 3))


def schema_of(block: dict):
    return read_schema(read_options({"schema": block}, schema_options()))


def test_schema_columns_primary_key_constraint_keys_and_table():
    schema = schema_of({
        "table": "FakeDatabase.FakeTable",
        "columns": [{"name": "id", "type": "bigint", "nullable": False, "defaultValue": 0, "comment": "primary key id"},
                    {"name": "name", "type": "string", "nullable": True, "comment": "name", "columnLength": 20},
                    {"name": "amount", "type": "decimal(38, 18)"}],
        "primaryKey": {"name": "id", "columnNames": ["id"]},
        "constraintKeys": [{"constraintName": "unique_name", "constraintType": "UNIQUE_KEY",
                            "constraintColumns": [{"columnName": "name", "sortType": "DESC"}]},
                           {"constraintName": "idx", "constraintColumns": [{"columnName": "amount"}]}],
    })
    assert schema.struct == T.StructType([T.StructField("id", T.LongType(), False),
                                          T.StructField("name", T.StringType(), True),
                                          T.StructField("amount", T.DecimalType(38, 18), True)])
    assert [(c.default, c.comment, c.length) for c in schema.columns] == [(0, "primary key id", 0), (None, "name", 20),
                                                                           (None, None, 0)]
    assert schema.table == "FakeDatabase.FakeTable" and schema.table_path == ("FakeDatabase", None, "FakeTable")
    assert schema.primary_key == PrimaryKey("id", ("id",))
    assert schema.constraint_keys == (ConstraintKey("unique_name", "UNIQUE_KEY", (("name", "DESC"),)),
                                      ConstraintKey("idx", "KEY", (("amount", "ASC"),)))


def test_schema_fields_form_and_table_names():
    schema = schema_of({"fields": {"id": "bigint", "c_row": {"c_int": "int"}}, "table": "s.t", "schema_first": True})
    assert schema.struct.names == ["id", "c_row"] and schema.primary_key is None
    assert schema.table_path == (None, "s", "t")
    assert schema_of({"fields": {"id": "int"}, "table": "d.s.t"}).table_path == ("d", "s", "t")
    # the doc's table says primaryKey.columns, its example columnNames: both are read
    assert schema_of({"fields": {"id": "int"}, "primaryKey": {"name": "pk", "columns": ["id"]}}).primary_key == \
        PrimaryKey("pk", ("id",))


@pytest.mark.parametrize("block, option, words", [
    ({"fields": {"a": "int"}, "columns": [{"name": "a", "type": "int"}]}, "schema.columns", "not both"),
    ({"columns": [{"name": "a"}]}, "schema.columns[0]", "needs 'type'"),
    ({"columns": [{"name": "a", "type": "int"}, {"name": "a", "type": "int"}]}, "schema.columns", "declared twice"),
    ({"fields": {"a": "decimal(40, 2)"}}, "schema.fields", "precision 1..38"),
    ({"fields": {"a": "int"}, "primaryKey": {"name": "pk", "columnNames": ["b"]}}, "schema.primaryKey.columnNames",
     "names 'b', which is not a column"),
    ({"fields": {"a": "int"}, "constraintKeys": [{"constraintName": "k", "constraintType": "FOREIGN",
                                                  "constraintColumns": [{"columnName": "a"}]}]},
     "schema.constraintKeys[0]", "is not one of INDEX_KEY, UNIQUE_KEY, KEY"),
    ({"fields": {"a": "int"}, "constraintKeys": [{"constraintName": "k", "constraintColumns": [
        {"columnName": "a", "sortType": "UP"}]}]}, "schema.constraintKeys[0].constraintColumns[0]", "ASC or DESC"),
])
def test_schema_mistakes_name_the_option(block, option, words):
    with pytest.raises(OptionError) as info:
        schema_of(block)
    assert info.value.option == option and words in info.value.message, info.value.message


def test_an_unknown_key_of_a_column_is_kept_as_a_warning_or_refused_when_strict():
    opts = read_options({"schema": {"columns": [{"name": "a", "type": "int", "colour": 1}]}}, schema_options())
    lenient = KeyCheck()
    assert read_schema(opts, check_keys=lenient).struct.names == ["a"]
    assert [(u.key, u.closest) for u in lenient.unknown] == [("schema.columns[0].colour", None)]
    with pytest.raises(OptionError) as info:
        read_schema(opts, check_keys=KeyCheck(strict=True))
    assert info.value.option == "schema.columns[0].colour"


def test_unknown_keys_inside_schema_are_reported_like_other_options():
    opts = read_options({"schema": {"fields": {"id": "int"}, "colour": "red"}}, schema_options(), strict=False)
    assert [(u.key, u.closest) for u in opts.unknown] == [("schema.colour", "schema.columns")]


FULL_SCHEMA = """
    schema {
      table = "FakeDatabase.FakeTable"
      columns = [
        { name = id, type = bigint, nullable = false, defaultValue = 0, comment = "primary key id" },
        { name = name, type = "string", nullable = true, comment = "name" },
        { name = at, type = time }
      ]
      primaryKey { name = "id", columnNames = [id] }
      constraintKeys = [
        { constraintName = "unique_name", constraintType = UNIQUE_KEY,
          constraintColumns = [{ columnName = "name", sortType = ASC }] }
      ]
    }
"""


def test_fake_source_and_local_file_read_the_full_schema_form(tmp_path):
    from seatide.config.loader import load_job_text

    text = (f"source {{\n FakeSource {{ plugin_output = a\n {FULL_SCHEMA} }}\n"
            f" LocalFile {{ plugin_output = b, path = \"{tmp_path}\", file_format_type = json\n {FULL_SCHEMA} }}\n}}\n"
            "sink { Console { plugin_input = a }\n Console { plugin_input = b } }")
    config = load_job_text(text)
    assert config.warnings == []
    for spec in config.sources:
        schema = spec.plugin.declared_schema()
        assert schema.struct.names == ["id", "name", "at"] and schema.struct["at"].dataType == T.TimeType(6)
        assert not schema.struct["id"].nullable
        assert schema.primary_key == PrimaryKey("id", ("id",)) and schema.table == "FakeDatabase.FakeTable"
        assert schema.constraint_keys[0] == ConstraintKey("unique_name", "UNIQUE_KEY", (("name", "ASC"),))
    assert config.sources[0].plugin.schema() == config.sources[0].plugin.declared_schema().struct
