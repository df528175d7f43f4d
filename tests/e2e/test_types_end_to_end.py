"""Every SeaTunnel type carried end to end: FakeSource rows -> transforms and sinks -> Assert on VALUES.

TIME goes through each transform (Sql, Filter, FieldMapper, Copy, Replace, Split, JsonPath,
FilterRowKind, RowKindExtractor) and each sink (LocalFile text/csv/json/parquet/orc, read back;
Console; Assert). One job holds all transform branches, so the SparkSession work stays small.
"""

from __future__ import annotations

import os

import pytest


pytestmark = pytest.mark.spark

# Every row holds the same values, so each equals_to rule checks every row.
FIELDS = """
  id = bigint
  t = time
  dec = "decimal(38, 18)"
  small = "decimal(2, 1)"
  d = date
  ts = timestamp
  m = "map<string, string>"
  a = "array<int>"
  r = { x = int, y = string, z = time }
  mr = "map<string, {c = int, t = time}>"
  n = "null"
  b = bytes
  bo = boolean
  f = double
  s = string
  j = string
"""
ROW = ('[1, "12:34:56.25", "12345678901234567890.123456789012345678", "9.9", "2024-02-29", '
       '"2024-02-29T23:59:58.5", { k = "v" }, [1, 2], [7, "seven", "01:02:03"], { e = [5, "23:59:59"] }, null, '
       '"AQID", true, 1.5, "a|b", "{\\"x\\": 42}"]')
SOURCE = f"""
  FakeSource {{
    plugin_output = "fake"
    schema = {{ fields {{ {FIELDS} }} }}
    rows = [{{ kind = INSERT, fields = {ROW} }}, {{ kind = INSERT, fields = {ROW} }}]
  }}
"""
TIME_RULE = '{ field_name = t, field_type = time, field_value = [{ rule_type = NOT_NULL }, { equals_to = "12:34:56.25" }] }'
EVERY_TYPE_RULES = [
    TIME_RULE,
    '{ field_name = id, field_type = bigint, field_value = [{ equals_to = 1 }] }',
    '{ field_name = dec, field_type = "decimal(38, 18)", '
    'field_value = [{ equals_to = "12345678901234567890.123456789012345678" }] }',
    '{ field_name = small, field_type = "decimal(2,1)", field_value = [{ equals_to = 9.9 }] }',
    '{ field_name = d, field_type = date, field_value = [{ equals_to = "2024-02-29" }] }',
    '{ field_name = ts, field_type = timestamp, field_value = [{ equals_to = "2024-02-29 23:59:58.5" }] }',
    '{ field_name = m, field_type = "map<string, string>", field_value = [{ equals_to = { k = "v" } }] }',
    '{ field_name = a, field_type = "array<int>", field_value = [{ equals_to = [1, 2] }] }',
    '{ field_name = r, field_type = "{x = int, y = string, z = time}", '
    'field_value = [{ equals_to = [7, "seven", "01:02:03"] }] }',
    '{ field_name = mr, field_type = "map<string, {c = int, t = time}>", '
    'field_value = [{ equals_to = { e = [5, "23:59:59"] } }] }',
    '{ field_name = n, field_type = "null", field_value = [{ rule_type = NULL }] }',
    '{ field_name = b, field_type = bytes, field_value = [{ equals_to = "AQID" }] }',
    '{ field_name = bo, field_type = boolean, field_value = [{ equals_to = true }] }',
    '{ field_name = f, field_type = double, field_value = [{ equals_to = 1.5 }] }',
]
# transform block -> rules its output must pass (TIME always; a field the transform makes)
TRANSFORMS = {
    "Sql": ('query = "select * from fake where t > cast(\'12:00:00\' as time)"', EVERY_TYPE_RULES),
    "Filter": ("include_fields = [id, t]", [TIME_RULE]),
    "FieldMapper": ("field_mapper = { id = id, t = when }",
                    ['{ field_name = when, field_type = time, field_value = [{ equals_to = "12:34:56.25" }] }']),
    "Copy": ("fields = { t2 = t }",
             [TIME_RULE, '{ field_name = t2, field_type = time, field_value = [{ equals_to = "12:34:56.25" }] }']),
    "Replace": ('replace_field = s, pattern = "a", replacement = "z"',
                [TIME_RULE, '{ field_name = s, field_value = [{ equals_to = "z|b" }] }']),
    "Split": ('separator = "\\\\|", split_field = s, output_fields = [s1, s2]',
              [TIME_RULE, '{ field_name = s2, field_value = [{ equals_to = "b" }] }']),
    "JsonPath": ('columns = [{ src_field = j, path = "$.x", dest_field = x, dest_type = int }]',
                 [TIME_RULE, '{ field_name = x, field_type = int, field_value = [{ equals_to = 42 }] }']),
    "FilterRowKind": ("exclude_kinds = [DELETE]", [TIME_RULE]),
    "RowKindExtractor": ("",
                         [TIME_RULE, '{ field_name = row_kind, field_value = [{ equals_to = "+I" }] }']),
}


def assert_sink(name: str, rules: list[str], rows: int = 2) -> str:
    return f"""
  Assert {{
    plugin_input = "{name}"
    rules {{
      row_rules = [{{ rule_type = MIN_ROW, rule_value = {rows} }}, {{ rule_type = MAX_ROW, rule_value = {rows} }}]
      field_rules = [{", ".join(rules)}]
    }}
  }}
"""


def job(source: str, transforms: str, sinks: str, env: str = "") -> str:
    return (f"env {{\n job.mode = BATCH\n job.retry.times = 0\n {env}\n}}\nsource {{ {source} }}\n"
            f"transform {{ {transforms} }}\nsink {{ {sinks} }}\n")


def finished(run) -> None:
    assert run.status == "FINISHED", run.error


def test_every_type_and_time_through_every_transform(local):
    transforms = "".join(f'\n  {name} {{ plugin_input = "fake", plugin_output = "{name.lower()}", {body} }}'
                         for name, (body, _) in TRANSFORMS.items())
    sinks = assert_sink("fake", EVERY_TYPE_RULES) + "".join(
        assert_sink(name.lower(), rules) for name, (_, rules) in TRANSFORMS.items())
    finished(local.run(job(SOURCE, transforms, sinks)))


def test_a_wrong_time_value_fails_the_assert(local):
    wrong = assert_sink("fake", [TIME_RULE.replace("12:34:56.25", "12:34:56")])
    run = local.run(job(SOURCE, "", wrong))
    assert run.status == "FAILED" and "field 't' rule equals_to \"12:34:56\": value 12:34:56.25" in run.error


def test_time_and_every_type_written_by_each_file_format_and_read_back(local, tmp_path):
    formats = ("text", "csv", "json", "parquet", "orc")
    # text, csv and json hold flat values; nested types go through parquet and orc only
    flat = "id = bigint, t = time, dec = \"decimal(38, 18)\", d = date, ts = timestamp, bo = boolean, f = double"
    flat_rules = [r for r in EVERY_TYPE_RULES if r.split(",")[0].split("=")[1].strip() in
                  ("t", "id", "dec", "d", "ts", "bo", "f")]
    sinks = ""
    for fmt in formats:
        columns = "" if fmt in ("parquet", "orc") else ", sink_columns = [id, t, dec, d, ts, bo, f]"
        sinks += (f'\n  LocalFile {{ plugin_input = "fake", path = "{tmp_path / fmt}", '
                  f'file_format_type = {fmt}{columns} }}')
    sinks += '\n  Console { plugin_input = "fake" }'
    written = local.run(job(SOURCE, "", sinks))
    finished(written)
    assert "12:34:56.250000" in written.stdout and "t<time>" in written.stdout
    for fmt in ("text", "csv", "json"):
        text = "".join(open(os.path.join(root, f)).read() for root, _, files in os.walk(tmp_path / fmt)
                       for f in files if not f.startswith((".", "_")))
        assert "12:34:56.25" in text, (fmt, text)    # written as a time of day, not a number
    sources = "".join(
        f'\n  LocalFile {{ plugin_output = "{fmt}", path = "{tmp_path / fmt}", file_format_type = {fmt}'
        + ("" if fmt in ("parquet", "orc") else f", schema = {{ fields {{ {flat} }} }}") + " }"
        for fmt in formats)
    # a null-typed field is stored as a string column of nulls (no format stores VOID)
    nested_rules = [r.replace('field_type = "null", ', "") for r in EVERY_TYPE_RULES]
    checks = "".join(assert_sink(fmt, nested_rules if fmt in ("parquet", "orc") else flat_rules)
                     for fmt in formats)
    finished(local.run(job(sources, "", checks)))


def test_time_in_a_checkpointed_job(driver):
    # micro-batches run in Spark's stream thread (foreachBatch), not the plain-batch thread
    transforms = '\n  Sql { plugin_input = "fake", plugin_output = "out", query = "select id, t, r from fake" }'
    finished(driver.run(job(SOURCE, transforms, assert_sink("out", [TIME_RULE]), env="checkpoint.interval = 1000")))


def test_every_type_with_a_date_keyed_map_as_seatunnels_full_types_job(local):
    """SeaTunnel's fake_full_types_to_assert: a map<date, string> and a row of every type, each
    checked with equals_to (the expected map used to go through JSON, whose maps take string keys)."""
    columns = [("c_null", '"null"', "null"), ("c_string", "string", '"Zed"'), ("c_boolean", "boolean", "true"),
               ("c_tinyint", "tinyint", "3"), ("c_int", "int", "444"), ("c_bigint", "bigint", "555555"),
               ("c_float", "float", "2.5"), ("c_double", "double", "7.25"),
               ("c_decimal", '"decimal(30, 8)"', "12345.6789"), ("c_date", "date", '"2001-02-03"'),
               ("c_timestamp", "timestamp", '"2001-02-03T04:05:06"'), ("c_time", "time", '"04:05:06"'),
               ("c_bytes", "bytes", '"AQID"'), ("c_array", '"array<int>"', "[3, 2, 1]"),
               ("c_map", '"map<date, string>"', '{ "2001-02-03" = d0 }'),
               ("c_map_nest", '"map<string, {c_int = int, c_string = string}>"', '{ k2 = [9, "x-y"] }')]
    fields = ", ".join(f"{name} = {kind}" for name, kind, _ in columns)
    values = ", ".join(value for _, _, value in columns)
    rules = [f"{{ field_name = {name}, field_type = {kind}, field_value = [{{ equals_to = {value} }}] }}"
             for name, kind, value in columns if value != "null"]
    rules.append(f"{{ field_name = c_row, field_type = {{ {fields} }}, field_value = [{{ equals_to = [{values}] }}] }}")
    source = (f'FakeSource {{ plugin_output = "fake", row.num = 1\n'
              f'  schema = {{ fields {{ {fields}, c_row = {{ {fields} }} }} }}\n'
              f'  rows = [{{ kind = INSERT, fields = [{values}, [{values}]] }}] }}')
    finished(local.run(job(source, "", assert_sink("fake", rules, rows=1))))


def test_maps_keyed_by_dates_and_numbers_are_written_as_json_text_and_read_back(local, tmp_path):
    """JSON keys are text: a date key is written as the date (Spark's JSON writer would write its
    day number, 19748), and read back into a map<date, ...> (Spark's JSON reader takes only
    string keys)."""
    fields = 'id = bigint, dm = "map<date, string>", nest = "array<map<int, time>>"'
    values = '[1, { "2024-01-26" = v0 }, [{ "7" = "01:02:03" }]]'
    source = (f'FakeSource {{ plugin_output = "fake", schema = {{ fields {{ {fields} }} }}\n'
              f'  rows = [{{ kind = INSERT, fields = {values} }}] }}')
    sinks = "".join(f'\n  LocalFile {{ plugin_input = "fake", path = "{tmp_path / fmt}", file_format_type = {fmt} }}'
                    for fmt in ("json", "csv"))
    finished(local.run(job(source, "", sinks)))
    for fmt in ("json", "csv"):
        text = "".join(open(os.path.join(root, f)).read() for root, _, files in os.walk(tmp_path / fmt)
                       for f in files if not f.startswith((".", "_")))
        assert "2024-01-26" in text and "19748" not in text and "01:02:03" in text, (fmt, text)
    rules = ['{ field_name = dm, field_type = "map<date, string>", field_value = [{ equals_to = { "2024-01-26" = v0 } }] }',
             '{ field_name = nest, field_type = "array<map<int, time>>", field_value = [{ equals_to = [{ "7" = "01:02:03" }] }] }']
    back = (f'LocalFile {{ plugin_output = "back", path = "{tmp_path / "json"}", file_format_type = json, '
            f'schema = {{ fields {{ {fields} }} }} }}')
    finished(local.run(job(back, "", assert_sink("back", rules, rows=1))))
