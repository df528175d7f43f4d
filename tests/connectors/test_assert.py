"""Assert sink: every rule passes and fails with a message naming rule, field and value."""

from __future__ import annotations

import datetime as dt
import os

import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.connectors.assertion import AssertionFailed
from seatide.connectors.assertion.sink import AssertSink
from seatide.plugin.base import Batch, PermanentError
from seatide.plugin.options import OptionError, read_options
from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.plugin.sink_protocol import open_sink
from seatide.runtime.commit_log import SinkCommitLog
from seatide.runtime.sink_runs import sink_run
from tests.sink_targets import apply_one

DDL = (f"name string, age int, note string, tags array<int>, attrs map<string,int>, day date, "
       f"price decimal(10,2), {ROW_KIND_COLUMN} tinyint")
GOOD = [("alice", 23, None, [1, 2], {"a": 1}, dt.date(2024, 1, 2), 1.5, 0),
        ("bob", 23, None, [1, 2], {"a": 1}, dt.date(2024, 1, 2), 1.5, 0)]


def assert_sink(rules: dict) -> AssertSink:
    return AssertSink(read_options({"rules": rules}, AssertSink.options))


def frame(spark, rows=GOOD):
    from pyspark.sql import functions as F

    df = spark.createDataFrame(rows, DDL.replace("decimal(10,2)", "double"))
    return df.withColumn("price", F.col("price").cast("decimal(10,2)"))


def check(spark, rules, rows=GOOD, previous=None):
    batch = Batch(0, "txn-0", previous or {})
    return apply_one(assert_sink(rules), frame(spark, rows), batch)


def field(name, *value_rules, field_type=None):
    rule = {"field_name": name, "field_value": list(value_rules)}
    return {"field_rules": [rule | ({"field_type": field_type} if field_type else {})]}


def bad(row_index: int, **changes):
    keys = ["name", "age", "note", "tags", "attrs", "day", "price", ROW_KIND_COLUMN]
    rows = [list(r) for r in GOOD]
    for key, value in changes.items():
        rows[row_index][keys.index(key)] = value
    return [tuple(r) for r in rows]


CASES = [  # rules, rows that break them, words of the message
    (field("name", {"rule_type": "NOT_NULL"}), bad(1, name=None), "field 'name' rule NOT_NULL: value null"),
    (field("note", {"rule_type": "NULL"}), bad(0, note="x"), "field 'note' rule NULL: value \"x\""),
    (field("age", {"rule_type": "MIN", "rule_value": 18}), bad(1, age=12), "field 'age' rule MIN 18: value 12"),
    (field("age", {"rule_type": "MAX", "rule_value": 100}), bad(0, age=120),
     "Assert failed: field 'age' rule MAX 100: value 120"),
    (field("age", {"rule_type": "MAX", "rule_value": 100}), bad(0, age=None), "rule MAX 100: value null"),
    (field("name", {"rule_type": "MIN_LENGTH", "rule_value": 3}), bad(1, name="bo"),
     "rule MIN_LENGTH 3: value \"bo\" (length 2)"),
    (field("name", {"rule_type": "MAX_LENGTH", "rule_value": 5}), bad(0, name="alexandra"),
     "rule MAX_LENGTH 5: value \"alexandra\" (length 9)"),
    (field("tags", {"rule_type": "MAX_LENGTH", "rule_value": 2}), bad(0, tags=[1, 2, 3]), "(length 3)"),
    (field("age", {"rule_type": "NOT_NULL", "equals_to": 23}), bad(1, age=24), "rule equals_to 23: value 24"),
    (field("tags", {"equals_to": [1, 2]}), bad(0, tags=[2, 1]), "rule equals_to [1, 2]: value [2, 1]"),
    (field("attrs", {"equals_to": {"a": 1}}), bad(1, attrs={"a": 2}), "rule equals_to {\"a\": 1}"),
    (field("day", {"equals_to": "2024-01-02"}), bad(1, day=dt.date(2024, 1, 3)), "value 2024-01-03"),
    (field("price", {"equals_to": 1.5}, field_type="decimal(10, 2)"), bad(0, price=9.0), "value 9.00"),
    (field("age", field_type="bigint"), None, "field 'age' rule field_type bigint (the field is int): value 23"),
]


@pytest.mark.parametrize("rules, broken, words", CASES)
def test_each_rule_passes_good_rows_and_names_the_offending_value(spark, rules, broken, words):
    if broken is not None:
        assert check(spark, rules) == {"rows": 2, "total_rows": 2}
    with pytest.raises(AssertionFailed) as failure:
        check(spark, rules, broken or GOOD)
    assert words in str(failure.value)


def spark_jobs(spark, group, action) -> int:
    context = spark.sparkContext
    context.setJobGroup(group, group)
    try:
        action()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    return len(context.statusTracker().getJobIdsForGroup(group))


def test_all_field_rules_of_a_batch_cost_what_counting_it_costs(spark):
    from pyspark.sql import functions as F

    rules = {"field_rules": [
        {"field_name": "name", "field_value": [{"rule_type": "NOT_NULL"}, {"rule_type": "MIN_LENGTH", "rule_value": 3}]},
        {"field_name": "age", "field_type": "int", "field_value": [{"rule_type": "MIN", "rule_value": 1},
                                                                   {"rule_type": "MAX", "rule_value": 99}]},
    ]}
    counting = spark_jobs(spark, "seatide-count", lambda: frame(spark).agg(F.count(F.lit(1))).collect())
    asserting = spark_jobs(spark, "seatide-assert", lambda: check(spark, rules))
    assert asserting == counting


def test_row_counts_survive_replays_and_restarts(spark, data_dir):
    sink = assert_sink({"row_rules": [{"rule_type": "MAX_ROW", "rule_value": 5},
                                      {"rule_type": "MIN_ROW", "rule_value": 4}]})
    log = SinkCommitLog(os.path.join(data_dir, "sinks", "sink[0]"))
    sink_run(sink, None, log).write(frame(spark), 0)
    sink_run(sink, None, log).write(frame(spark), 0)          # replay: not counted
    with pytest.raises(AssertionFailed, match="row rule MIN_ROW 4: 2 rows"):
        sink_run(sink, None, log).end_of_data()
    restarted = sink_run(sink, None, log)
    restarted.write(frame(spark), 1)
    restarted.end_of_data()                                       # 4 rows: fine
    with pytest.raises(AssertionFailed, match="row rule MAX_ROW 5: 6 rows") as failure:
        sink_run(sink, None, log).write(frame(spark), 2)
    assert log.committed(2) is None
    assert isinstance(failure.value, PermanentError)   # the runtime fails the job, no retries


def test_min_row_with_no_batch_at_all_fails(spark):
    targets = open_sink(assert_sink({"row_rules": [{"rule_type": "MIN_ROW", "rule_value": 1}]}), None)
    with pytest.raises(AssertionFailed, match="MIN_ROW 1: 0 rows"):
        targets.end_of_data({})


def test_catalog_table_column_rule_compares_names_and_types(spark):
    columns = [{"name": n, "type": t} for n, t in [("name", "string"), ("age", "int"), ("note", "string"),
               ("tags", "array<int>"), ("attrs", "map<string, int>"), ("day", "date"), ("price", "decimal(10,2)")]]
    assert check(spark, {"catalog_table_rule": {"column_rule": columns}})["rows"] == 2
    wrong = columns[:-1] + [{"name": "cost", "type": "double"}]
    wrong[1] = {"name": "age", "type": "bigint"}
    with pytest.raises(AssertionFailed) as failure:
        check(spark, {"catalog_table_rule": {"column_rule": wrong}})
    assert "missing 'cost'; unexpected 'price'; 'age' is int, expected bigint" in str(failure.value)


@pytest.mark.parametrize("rules, path, words", [
    ({"row_rules": [{"rule_type": "MOST_ROW", "rule_value": 1}]}, "rules.row_rules[0].rule_type", "MOST_ROW"),
    ({"row_rules": [{"rule_type": "MAX_ROW"}]}, "rules.row_rules[0].rule_value", "needs a number"),
    (field("age", {"rule_type": "MIN"}), "rules.field_rules[0].field_value[0].rule_value", "rule MIN needs"),
    (field("age", {"rule_type": "MIN_ROW", "rule_value": 1}), "rules.field_rules[0].field_value[0].rule_type",
     "belongs in row_rules"),
    (field("age", {"rule_value": 1}), "rules.field_rules[0].field_value[0]", "needs rule_type"),
    (field("age", field_type="integr"), "rules.field_rules[0].field_type", "unknown type 'integr'"),
    ({"catalog_table_rule": {"primary_key_rule": {"primary_key_name": "pk"}}},
     "rules.catalog_table_rule.primary_key_rule.primary_key_columns", "list the key's columns"),
    ({"catalog_table_rule": {"constraint_key_rule": [{"constraint_key_name": "uk", "constraint_key_type": "UNIQ",
                                                      "constraint_key_columns": ["id"]}]}},
     "rules.catalog_table_rule.constraint_key_rule[0].constraint_key_type", "not one of INDEX_KEY, UNIQUE_KEY"),
    ({"catalog_table_rule": {"column_rule": [{"name": "id", "type": "int", "column_length": -1}]}},
     "rules.catalog_table_rule.column_rule[0].column_length", "whole number"),
    ({"tables_configs": [{"row_rules": []}]}, "rules.tables_configs[0].table_path", "name the table"),
    ({"row_rules": [5]}, "rules.row_rules[0]", "must be an object { ... }, got a number"),
])
def test_malformed_rules_are_refused_at_construction(rules, path, words):
    with pytest.raises(OptionError) as error:
        assert_sink(rules)
    assert error.value.option == path and words in str(error.value)


def test_an_unknown_key_in_rules_is_a_warning_and_refused_only_when_strict():
    from seatide.config.env import read_env

    sink = AssertSink(read_options({"rules": {"field_rule": [], "row_rules": [{"rule_type": "MIN_ROW",
                                                                             "rule_value": 1, "rule_valu": 2}]}},
                                   AssertSink.options))
    assert [(n.key, n.closest) for n in sink.notices] == [("rules.field_rule", "field_rules"),
                                                           ("rules.row_rules[0].rule_valu", "rule_value")]
    with pytest.raises(OptionError) as error:
        AssertSink(read_options({"rules": {"field_rule": []}}, AssertSink.options), env=read_env({}, strict=True))
    assert error.value.option == "rules.field_rule" and "did you mean 'field_rules'?" in error.value.message


def test_field_type_holds_for_null_values_of_any_type_as_in_seatunnel(spark):
    """SeaTunnel checks each value's type, and NULL passes: a map's missing key (a string
    field, every value NULL) meets field_type = null; one non-NULL value breaks it."""
    df = spark.createDataFrame([("a", None), ("b", None)], "k string, missing string")
    rules = {"field_rules": [{"field_name": "missing", "field_type": "null", "field_value": [{"rule_type": "NULL"}]},
                             {"field_name": "missing", "field_type": "bigint"}]}
    assert apply_one(assert_sink(rules), df, Batch(0, "txn-0", {}))["rows"] == 2
    with pytest.raises(AssertionFailed, match=r"field 'k' rule field_type null \(the field is string\): value \"a\""):
        apply_one(assert_sink({"field_rules": [{"field_name": "k", "field_type": "null"}]}), df, Batch(0, "txn-0", {}))


def test_rules_from_a_seatunnel_job_file(spark, data_dir):
    job = load_job_text(f"""
        source {{ LocalFile {{ path = "{data_dir}", file_format_type = text }} }}
        sink {{
          Assert {{
            rules = {{
              row_rules = [{{ rule_type = MAX_ROW, rule_value = 10 }}, {{ rule_type = MIN_ROW, rule_value = 1 }}]
              field_rules = [{{
                field_name = name
                field_type = string
                field_value = [{{ rule_type = NOT_NULL }}, {{ rule_type = MIN_LENGTH, rule_value = 3 }}]
              }}, {{
                field_name = note
                field_value = [{{ rule_type = NULL }}]
              }}]
            }}
          }}
        }}
    """)
    assert apply_one(job.sinks[0].plugin, frame(spark), Batch(0, "t", {}))["total_rows"] == 2
    with pytest.raises(ConfigError, match=r"rules.field_rules\[0\].field_value\[0\].rule_type"):
        load_job_text(f"""
            source {{ LocalFile {{ path = "{data_dir}", file_format_type = text }} }}
            sink {{ Assert {{ rules {{ field_rules = [{{ field_name = a, field_value = [{{ rule_type = BIG }}] }}] }} }} }}
        """)


def test_types_compare_by_names_and_types_not_spark_nullability(spark):
    # Literal maps and named_struct are non-nullable inside; the declared types are nullable.
    df = spark.sql(f"select map('k', 'v') as m, named_struct('x', 1, 'y', array(1)) as r, "
                   f"CAST(0 AS TINYINT) AS {ROW_KIND_COLUMN}")
    rules = {"field_rules": [{"field_name": "m", "field_type": "map<string, string>"},
                             {"field_name": "r", "field_type": {"x": "int", "y": "array<int>"}}],
             "catalog_table_rule": {"column_rule": [{"name": "m", "type": "map<string,string>"},
                                                    {"name": "r", "type": "{x = int, y = \"array<int>\"}"}]}}
    batch = Batch(0, "txn-0", {})
    assert apply_one(assert_sink(rules), df, batch)["rows"] == 1
    renamed = {"field_rules": [{"field_name": "r", "field_type": {"z": "int", "y": "array<int>"}}]}
    with pytest.raises(AssertionFailed, match=r"rule field_type row<z int, y array<int>> \(the field is row<x int"):
        apply_one(assert_sink(renamed), df, batch)


def test_equals_to_null_compares_nothing_as_in_seatunnel_and_says_so(spark):
    """SeaTunnel reads a null as no value: its func_system job writes `equals_to = null` beside
    field_type = "null", and the rule passes whatever the value."""
    sink = assert_sink(field("name", {"equals_to": None}))
    assert [n.key for n in sink.notices] == ["rules.field_rules[0].field_value[0].equals_to"]
    assert "checks nothing" in sink.notices[0].describe()
    assert apply_one(sink, frame(spark), Batch(0, "txn-0", {}))["rows"] == 2
    with pytest.raises(AssertionFailed, match="rule NOT_NULL"):
        apply_one(assert_sink(field("note", {"rule_type": "NOT_NULL", "equals_to": None})), frame(spark),
                  Batch(0, "txn-0", {}))


def test_equals_to_builds_maps_with_keys_of_any_type_without_json(spark):
    """A map keyed by dates or numbers (SeaTunnel's fake_full_types_to_assert has map<date, string>),
    also inside arrays and rows: the expected value is built from the rule, not parsed from JSON
    (Spark's from_json takes only string keys)."""
    df = spark.sql("select map(date'2024-01-26', 'v0') as dm, map(7, array(time'01:02:03')) as im, "
                   "named_struct('d', map(1.5d, true), 'b', X'0102') as r, "
                   f"array(map(date'2024-01-01', 1)) as am, CAST(0 AS TINYINT) AS {ROW_KIND_COLUMN}")
    rules = {"field_rules": [
        {"field_name": "dm", "field_type": "map<date, string>", "field_value": [{"equals_to": {"2024-01-26": "v0"}}]},
        {"field_name": "im", "field_type": "map<int, array<time>>", "field_value": [{"equals_to": {"7": ["01:02:03"]}}]},
        {"field_name": "r", "field_value": [{"equals_to": [{"1.5": True}, "AQI="]}]},
        {"field_name": "am", "field_value": [{"equals_to": [{"2024-01-01": 1}]}]}]}
    assert apply_one(assert_sink(rules), df, Batch(0, "txn-0", {}))["rows"] == 1
    wrong = {"field_rules": [{"field_name": "dm", "field_value": [{"equals_to": {"2024-01-27": "v0"}}]}]}
    with pytest.raises(AssertionFailed, match=r"field 'dm' rule equals_to .*2024-01-27"):
        apply_one(assert_sink(wrong), df, Batch(0, "txn-0", {}))
