"""SeaTunnel-style jobs, written from the option pages, each checked by an Assert sink.

The jobs run in-process on the shared SparkSession: the source's rows, every transform,
then the Assert sink's writer over the result (one batch, then end of data), so a broken
rule fails the test with the sink's own message.
"""

from __future__ import annotations

import string
import tempfile

from seatide.config.env import read_env
import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.plugin.base import ReadContext, TransformContext
from seatide.runtime.commit_log import SinkCommitLog
from seatide.runtime.sink_runs import sink_run


def run_job(spark, text: str):
    """Runs a one-source job with Assert sinks (one batch, then end of data, through the sink
    protocol as the runtime runs it); returns the rows that reached the sinks."""
    job = load_job_text(text)
    ctx = ReadContext(spark, micro_batch=False, unbounded=False, parallelism=job.env.parallelism,
                      max_rows_per_batch=1_000_000, read_interval_ms=1, plugin_id="source[0]")
    df = job.sources[0].plugin.read(ctx)
    for spec in job.transforms:
        df = spec.plugin.apply(df, TransformContext(spark, "fake", "out", micro_batch=False))
    df = df.cache()
    for spec in job.sinks:
        run = sink_run(spec.plugin, None, SinkCommitLog(tempfile.mkdtemp(prefix="seatide-commit-log-")))
        run.write(df, 0)
        run.end_of_data()
    return df.collect()


def test_range_data_example_bounds_exclude_max_and_strings_are_letters(spark):
    rows = run_job(spark, """
    env { job.mode = BATCH, execution.parallelism = 2 }
    source { FakeSource {
      row.num = 200
      string.length = 12
      bytes.length = 9
      tinyint.min = 1
      tinyint.max = 9
      smallint.min = 10
      smallint.max = 19
      int.min = 20
      int.max = 29
      bigint.min = 30
      bigint.max = 39
      float.min = 40.0
      float.max = 43.0
      double.min = 44.0
      double.max = 47.0
      schema { fields { c_string = string, c_bytes = bytes, c_tinyint = tinyint, c_smallint = smallint,
                        c_int = int, c_bigint = bigint, c_float = float, c_double = double } }
    } }
    sink { Assert { rules {
      row_rules = [{ rule_type = MIN_ROW, rule_value = 400 }, { rule_type = MAX_ROW, rule_value = 400 }]
      field_rules = [
        { field_name = c_string, field_type = string, field_value = [
            { rule_type = NOT_NULL }, { rule_type = MIN_LENGTH, rule_value = 12 },
            { rule_type = MAX_LENGTH, rule_value = 12 }] },
        { field_name = c_tinyint, field_type = tinyint, field_value = [
            { rule_type = MIN, rule_value = 1 }, { rule_type = MAX, rule_value = 8 }] },
        { field_name = c_smallint, field_value = [{ rule_type = MIN, rule_value = 10 }, { rule_type = MAX, rule_value = 18 }] },
        { field_name = c_int, field_value = [{ rule_type = MIN, rule_value = 20 }, { rule_type = MAX, rule_value = 28 }] },
        { field_name = c_bigint, field_value = [{ rule_type = MIN, rule_value = 30 }, { rule_type = MAX, rule_value = 38 }] },
        { field_name = c_float, field_value = [{ rule_type = MIN, rule_value = 40 }, { rule_type = MAX, rule_value = 43 }] },
        { field_name = c_double, field_value = [{ rule_type = MIN, rule_value = 44 }, { rule_type = MAX, rule_value = 47 }] }
      ]
    } } }
    """)
    # execution.parallelism = 2 made two readers of 200 rows (the Assert row rules say 400).
    letters = set(string.ascii_letters)
    assert all(set(r.c_string) <= letters and set(r.c_bytes.decode()) <= letters for r in rows)
    assert len({ch for r in rows for ch in r.c_string}) == 32      # A-P and a-p, uniformly
    # Every value of the half-open range shows up, the max never does.
    assert {r.c_tinyint for r in rows} == set(range(1, 9))
    assert {r.c_bigint for r in rows} == set(range(30, 39))


def test_template_data_example_with_the_documented_int_fake_template_spelling(spark):
    rows = run_job(spark, """
    source { FakeSource {
      row.num = 60
      string.fake.mode = "template"
      string.template = ["tyrantlucifer", "hailin", "kris"]
      int.fake.template = "template"
      int.template = [20, 21, 22]
      double.fake.mode = "template"
      double.template = [44.0, 45.0]
      schema { fields { c_string = string, c_int = int, c_double = double } }
    } }
    sink { Assert { rules { field_rules = [
      { field_name = c_string, field_value = [{ rule_type = MIN_LENGTH, rule_value = 4 },
                                              { rule_type = MAX_LENGTH, rule_value = 13 }] },
      { field_name = c_int, field_value = [{ rule_type = MIN, rule_value = 20 }, { rule_type = MAX, rule_value = 22 }] }
    ] } } }
    """)
    assert {r.c_string for r in rows} == {"tyrantlucifer", "hailin", "kris"}
    assert {r.c_int for r in rows} == {20, 21, 22} and {r.c_double for r in rows} == {44.0, 45.0}


def test_customised_rows_example_every_type_checked_by_equals_to(spark):
    rows = run_job(spark, """
    source { FakeSource {
      schema = { fields {
        c_map = "map<string, string>", c_array = "array<int>", c_string = string, c_boolean = boolean,
        c_tinyint = tinyint, c_smallint = smallint, c_int = int, c_bigint = bigint, c_float = float,
        c_double = double, c_decimal = "decimal(30, 8)", c_null = "null", c_bytes = bytes, c_date = date,
        c_timestamp = timestamp, c_row = { c_int = int, c_string = string }
      } }
      rows = [
        { kind = INSERT, fields = [{"a": "b"}, [101], "c_string", true, 117, 15987, 56387395,
          7084913402530365000, 1.23, 1.23, "2924137191386439303744.39292216", null, "bWlJWmo=",
          "2023-04-22", "2023-04-22T23:20:58", [5, "five"]] }
        { kind = DELETE, fields = [{"a": "f"}, [104], "c_string", false, 117, 15987, 56387395,
          7084913402530365000, 1.23, 1.23, "2924137191386439303744.39292216", null, "bWlJWmo=",
          "2023-04-22", "2023-04-22T23:20:58", { c_int = 6, c_string = "six" }] }
      ]
    } }
    sink { Assert { rules {
      row_rules = [{ rule_type = MIN_ROW, rule_value = 2 }, { rule_type = MAX_ROW, rule_value = 2 }]
      field_rules = [
        { field_name = c_string, field_value = [{ equals_to = "c_string" }] },
        { field_name = c_tinyint, field_type = tinyint, field_value = [{ equals_to = 117 }] },
        { field_name = c_smallint, field_value = [{ equals_to = 15987 }] },
        { field_name = c_int, field_value = [{ equals_to = 56387395 }] },
        { field_name = c_bigint, field_value = [{ equals_to = 7084913402530365000 }] },
        { field_name = c_double, field_value = [{ equals_to = 1.23 }] },
        { field_name = c_decimal, field_type = "decimal(30, 8)",
          field_value = [{ equals_to = "2924137191386439303744.39292216" }] },
        { field_name = c_null, field_value = [{ rule_type = NULL }] },
        { field_name = c_date, field_value = [{ equals_to = "2023-04-22" }] },
        { field_name = c_timestamp, field_value = [{ equals_to = "2023-04-22T23:20:58" }] }
      ]
    } } }
    """)
    by_kind = {r["__row_kind"]: r for r in rows}
    assert by_kind[0].c_map == {"a": "b"} and by_kind[3].c_map == {"a": "f"}
    assert by_kind[0].c_bytes == b"miIZj" and by_kind[0].c_array == [101]
    assert (by_kind[0].c_row.c_int, by_kind[3].c_row.c_string) == (5, "six")
    assert by_kind[0].c_boolean is True and by_kind[3].c_boolean is False


def test_dynamic_compile_in_a_job_checked_by_assert(spark):
    run_job(spark, '''
    source { FakeSource {
      schema = { fields { name = string, age = int } }
      rows = [{ kind = INSERT, fields = ["Joy Ding", 20] }, { kind = INSERT, fields = ["Kin Dom", 30] }]
    } }
    transform { DynamicCompile {
      compile_language = "PYTHON"
      source_code = """
def transform(batch):
    batch["age"] = batch["age"].where(batch["age"] != 20, 40)
    batch["compile_language"] = "PYTHON"
    return batch
"""
      output_schema = { fields { name = string, age = int, compile_language = string } }
    } }
    sink { Assert { rules {
      field_rules = [
      { field_name = age, field_value = [{ rule_type = MIN, rule_value = 30 }, { rule_type = MAX, rule_value = 40 }] },
      { field_name = compile_language, field_type = string, field_value = [{ equals_to = "PYTHON" }] }
      ]
      catalog_table_rule { column_rule = [
        { name = name, type = string }, { name = age, type = int }, { name = compile_language, type = string }
      ] }
    } } }
    ''')


def test_legacy_execution_env_keys_map_onto_seatide_env():
    env = read_env({"execution.parallelism": 3, "execution.checkpoint.interval": 5000,
                    "execution.checkpoint.timeout": 9000})
    assert (env.parallelism, env.checkpoint_interval_ms, env.checkpoint_timeout_ms) == (3, 5000, 9000)


def test_jars_env_key_adds_to_spark_jars():
    env = read_env({"jars": "file:///opt/a.jar;file:///opt/b.jar", "spark": {"jars": "/opt/c.jar"}})
    assert env.spark_conf["spark.jars"] == "/opt/c.jar,file:///opt/a.jar,file:///opt/b.jar"


def test_unfilled_sink_placeholder_in_a_quoted_path_is_refused():
    # The source declares no table name, so the catalog cannot fill it (test_catalog_rules.py).
    with pytest.raises(ConfigError, match=r"placeholder \$\{table_name\} cannot be filled"):
        load_job_text('source { FakeSource { schema = { fields { a = int } } } }\n'
                      'sink { LocalFile { path = "/tmp/out/${table_name}", file_format_type = csv } }')
