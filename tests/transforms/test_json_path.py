"""JsonPath: typed fields out of JSON, error handling, row sources."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.plugin.rowkind import ROW_KIND_COLUMN, RowKind
from seatide.transforms.fields import TransformInputError
from seatide.transforms.lenient_json import with_readable
from tests.e2e.harness import InProcessCluster
from tests.transforms.conftest import frame, job_text, rows_of, transform_from

I, UA = RowKind.INSERT, RowKind.UPDATE_AFTER
DOC = ('{"data": {"c_string": "this is a string", "c_boolean": true, "c_integer": 42, '
       '"c_decimal": 10.55, "c_date": "2023-10-29", "c_array": ["item1", "item2"], '
       '"c_map_array": [{"k": "v"}], "c_obj": {"x": 1}}}')


def json_path(columns: str, extra: str = ""):
    return transform_from(f"JsonPath {{ columns = [{columns}]\n {extra} }}")


def col(path: str, dest: str, dest_type: str | None = None, extra: str = "") -> str:
    typed = f', dest_type = "{dest_type}"' if dest_type else ""
    more = f", {extra}" if extra else ""
    return f'{{ src_field = data, path = "{path}", dest_field = {dest}{typed}{more} }}'


@pytest.fixture
def docs(spark):
    return frame(spark, [(1, DOC, UA), (2, None, I)], "id int, data string")


def test_typed_fields_from_the_seatunnel_doc_example(docs, ctx):
    columns = ", ".join([
        col("$.data.c_string", "c1_string"), col("$.data.c_boolean", "c1_boolean", "boolean"),
        col("$.data.c_integer", "c1_integer", "int"), col("$.data.c_decimal", "c1_decimal", "decimal(4,2)"),
        col("$.data.c_date", "c1_date", "date"), col("$.data.c_array", "c1_array", "array<string>"),
        col("$.data.c_map_array", "c1_map_array", "array<map<string, string>>"),
        col("$.data.c_obj", "c1_obj"), col("$.data.missing", "c1_missing", "int")])
    out = json_path(columns).apply(docs, ctx)
    assert out.columns[:2] == ["id", "data"] and out.columns[-1] == ROW_KIND_COLUMN
    row = out.where("id = 1").first().asDict()
    assert row["c1_string"] == "this is a string" and row["c1_boolean"] is True
    assert row["c1_integer"] == 42 and row["c1_decimal"] == Decimal("10.55")
    assert row["c1_date"] == dt.date(2023, 10, 29) and row["c1_array"] == ["item1", "item2"]
    assert row["c1_map_array"] == [{"k": "v"}] and row["c1_obj"] == '{"x":1}'
    assert row["c1_missing"] is None and row[ROW_KIND_COLUMN] == int(UA)
    null_source = out.where("id = 2").first().asDict()
    assert null_source["c1_string"] is None and null_source["c1_integer"] is None
    assert dict(out.dtypes)["c1_integer"] == "int"


def test_semicolon_form_extracts_several_fields(docs, ctx):
    transform = json_path('{ src_field = data, path = "$.data.c_string;$.data.c_integer", '
                          'dest_field = "s;i", dest_type = "string;bigint" }')
    row = transform.apply(docs, ctx).where("id = 1").first()
    assert (row.s, row.i) == ("this is a string", 42)


def test_row_source_reads_as_an_array_of_values(spark, ctx):
    from pyspark.sql import functions as F

    df = frame(spark, [("a", 18, I)], "name string, age int")
    df = df.select(F.struct("name", "age").alias("col"), ROW_KIND_COLUMN)
    transform = json_path('{ src_field = col, path = "$[0]", dest_field = name }, '
                          '{ src_field = col, path = "$[1]", dest_field = age, dest_type = int }')
    assert rows_of(transform.apply(df, ctx)) == [(("a", 18), "a", 18, I)]


def test_fail_stops_the_job_naming_field_and_value(spark, ctx):
    df = frame(spark, [('{"n": "abc"}', I)], "data string")
    out = json_path(col("$.n", "n", "int")).apply(df, ctx)
    with pytest.raises(Exception) as err:
        out.collect()
    text = str(err.value)
    assert "JsonPath: field 'n' (path $.n, type int) from 'data': the value does not convert to int" in text
    assert '{"n": "abc"}' in text


def test_skip_drops_rows_with_bad_json_or_bad_values(spark, ctx):
    df = frame(spark, [('{"n": 1}', I), ('{"n": "abc"}', I), ("not json", UA), (None, I)], "data string")
    out = json_path(col("$.n", "n", "int"), "row_error_handle_way = SKIP").apply(df, ctx)
    assert rows_of(out) == [('{"n": 1}', 1, I), (None, None, I)]


def test_column_skip_nulls_the_field_and_skip_row_drops_the_row(spark, ctx):
    df = frame(spark, [('{"n": "abc", "m": 2}', I), ('{"n": 1, "m": "x"}', I)], "data string")
    out = json_path(col("$.n", "n", "int", 'column_error_handle_way = SKIP') + ", "
                    + col("$.m", "m", "int", 'column_error_handle_way = SKIP_ROW')).apply(df, ctx)
    assert rows_of(out) == [('{"n": "abc", "m": 2}', None, 2, I)]


def test_missing_source_field_names_it(docs, ctx):
    with pytest.raises(TransformInputError, match=r"JsonPath: columns names field 'payload'.*\(available fields: id, data\)"):
        json_path('{ src_field = payload, path = "$.a", dest_field = a }').apply(docs, ctx)


def test_non_json_source_type_is_refused(docs, ctx):
    with pytest.raises(TransformInputError, match="src_field 'id' is int"):
        json_path('{ src_field = id, path = "$.a", dest_field = a }').apply(docs, ctx)


def test_json_path_on_a_stream(stream):
    rows = stream.run([{"data": '{"a": {"b": 7}}', "kind": 2}], "data string",
                      json_path(col("$.a.b", "b", "int")))
    assert rows == [('{"a": {"b": 7}}', 7, UA)]


@pytest.mark.parametrize("columns, message", [
    ("", "columns is empty"),
    ("{ path = \"$.a\", dest_field = a }", "columns[0].src_field is missing or empty"),
    (col("$..a", "a"), "is not a JSONPath SeaTide can evaluate"),
    (col("$.a[?(@.b)]", "a"), "is not a JSONPath SeaTide can evaluate"),
    (col("$.a", "a", "integr"), "columns[0].dest_type: unknown type 'integr'"),
    (col("$.a", "a", extra="column_error_handle_way = IGNORE"), "must be one of FAIL, SKIP, SKIP_ROW"),
    ('{ src_field = data, path = "$.a;$.b", dest_field = "a;b" }', "need the same number of ';'-separated items"),
    (col("$.a", "x") + ", " + col("$.b", "x"), "lists the output field 'x' more than once"),
    (col("$.a", "__row_kind"), "reserves for the row kind"),
    ("a", "columns[0] must be an object"),
])
def test_bad_columns_name_plugin_and_option(columns, message):
    with pytest.raises(ConfigError) as err:
        load_job_text(job_text(f"JsonPath {{ columns = [{columns}] }}"))
    assert err.value.plugin == "transform[0] JsonPath" and err.value.option == "columns"
    assert message in str(err.value)


def test_bad_row_error_handle_way():
    with pytest.raises(ConfigError) as err:
        load_job_text(job_text(f"JsonPath {{ columns = [{col('$.a', 'a')}], row_error_handle_way = LOG }}"))
    assert err.value.option == "row_error_handle_way" and "one of FAIL, SKIP, SKIP_ROW" in str(err.value)


# What SeaTunnel's reader makes of a JSON document written unquoted in a HOCON list: its
# quoted pieces and unquoted words concatenate, so the quotes go (Typesafe Config does it too).
UNQUOTED = ("{data:{c_string: this is a string,c_boolean: true,c_integer: 42,c_decimal: 10.55,"
            "c_date:'2023-10-29',c_time:\"16:12:43.459\",c_list:[a b, 2,,]}}")


@pytest.mark.parametrize(("text", "strict"), [
    (UNQUOTED, '{"data":{"c_string":"this is a string","c_boolean":true,"c_integer":42,"c_decimal":10.55,'
               '"c_date":"2023-10-29","c_time":"16:12:43.459","c_list":["a b",2]}}'),
    ("{'a': 'it\\'s \"x\"', b: 007, c: 1.2.3, d: -, 'e f': \\u}", '{"a":"it\'s \\"x\\"","b":7,"c":"1.2.3","d":"-","e f":"\\\\u"}'),
    ("[1,,2,]", "[1,2]"),
    ("{a: 123456789012345678901234567890.5}", '{"a":123456789012345678901234567890.5}'),
    ('{"strict": [1, 2]}', '{"strict": [1, 2]}'),
    ("abc", None), ("{a: }", None), ("{a: 1", None), ("  ", None),
])
def test_the_lenient_forms_seatunnels_json_parser_accepts(spark, text, strict):
    from pyspark.sql import functions as F

    df, (_, _, name, is_json) = with_readable(spark.createDataFrame([(text,)], "t string"), F.col("t"), "j")
    row = df.select(name, is_json).first()
    assert (row[0] if row[1] else None) == strict


def test_seatunnels_unquoted_json_documents_are_read_as_its_parser_reads_them(spark, ctx):
    df = frame(spark, [(UNQUOTED, I), ('{"c_string": "strict"}', UA), ("not json", I)], "data string")
    columns = ", ".join([col("$.data.c_string", "s"), col("$.data.c_boolean", "b", "boolean"),
                         col("$.data.c_integer", "i", "int"), col("$.data.c_decimal", "d", "decimal(4,2)"),
                         col("$.data.c_date", "day", "date"), col("$.data.c_list[1]", "second", "int")])
    out = json_path(columns, "row_error_handle_way = SKIP").apply(df, ctx)
    got = [r.asDict() for r in out.orderBy("data").collect()]
    assert [(r["s"], r["b"], r["i"], r["d"], r["day"], r["second"]) for r in got] == [
        (None, None, None, None, None, None),        # strict JSON without "data": a path that finds nothing
        ("this is a string", True, 42, Decimal("10.55"), dt.date(2023, 10, 29), 2)]   # "not json" skipped


def test_a_seatunnel_job_with_a_json_document_in_a_hocon_list_runs(spark, tmp_path):
    """The form of SeaTunnel's own JsonPath test job: the JSON is written unquoted in the
    FakeSource template, HOCON strips its quotes, JsonPath reads what is left."""
    template = ('["{"data":{"c_string": "this is a string","c_boolean": "true","c_integer": "42",'
                '"c_decimal": "10.55","c_date":"\'2023-10-29\'","c_time":\\"16:12:43.459\\"}}"]')
    rule = "{{ field_name = {0}, field_type = \"{1}\", field_value = [{{ rule_type = NOT_NULL, equals_to = {2} }}] }}"
    rules = ", ".join(rule.format(*r) for r in [
        ("s", "string", '"this is a string"'), ("b", "boolean", "true"), ("i", "int", "42"),
        ("d", "decimal(4,2)", "10.55"), ("day", "date", '"2023-10-29"'), ("t", "time", '"16:12:43.459"')])
    path = ", ".join(f'{{ src_field = data, path = "$.data.{p}", dest_field = {d}, dest_type = "{t}" }}' for p, d, t in [
        ("c_string", "s", "string"), ("c_boolean", "b", "boolean"), ("c_integer", "i", "int"),
        ("c_decimal", "d", "decimal(4,2)"), ("c_date", "day", "date"), ("c_time", "t", "time")])
    text = f"""
env {{ job.mode = "BATCH" }}
source {{ FakeSource {{ plugin_output = fake, row.num = 3, string.fake.mode = template
    string.template = {template}
    schema = {{ fields {{ data = string }} }} }} }}
transform {{ JsonPath {{ plugin_input = fake, plugin_output = out, columns = [{path}] }} }}
sink {{ Assert {{ plugin_input = out, rules {{ row_rules = [{{ rule_type = MIN_ROW, rule_value = 3 }}]
    field_rules = [{rules}] }} }} }}
"""
    run = InProcessCluster(spark, str(tmp_path / "data")).run(text)
    assert run.status == "FINISHED", run.error
