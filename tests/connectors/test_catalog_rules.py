"""The catalog a sink receives (plan.catalog): Assert's catalog_table_rule against it, and
sink option placeholders filled from it — SeaTunnel-style jobs, FakeSource to sink."""

from __future__ import annotations

import os
import secrets
import tempfile

import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.connectors.assertion import AssertionFailed
from seatide.connectors.jdbc.url import JdbcUrl
from seatide.plugin.base import ReadContext, SinkContext, TransformContext
from seatide.plugin.sink_protocol import open_sink
from seatide.runtime.commit_log import SinkCommitLog
from seatide.runtime.sink_runs import sink_run

SOURCE = """
source { FakeSource {
  row.num = 3
  schema {
    table = "shop.public.orders"
    columns = [
      { name = id, type = bigint, nullable = false, defaultValue = 0, comment = "order id" },
      { name = code, type = string, columnLength = 12, comment = "order code" },
      { name = amount, type = int }
    ]
    primaryKey { name = pk_orders, columnNames = [id] }
    constraintKeys = [{ constraintName = uk_code, constraintType = UNIQUE_KEY,
                        constraintColumns = [{ columnName = code, sortType = DESC }] }]
  }
} }
"""

RULES = """
  primary_key_rule { primary_key_name = pk_orders, primary_key_columns = [id] }
  constraint_key_rule = [{ constraint_key_name = uk_code, constraint_key_type = UNIQUE_KEY,
    constraint_key_columns = [{ constraint_key_column_name = code, constraint_key_sort_type = DESC }] }]
  column_rule = [
    { name = id, type = bigint, nullable = false, default_value = "0", comment = "order id" },
    { name = code, type = string, column_length = 12, nullable = true, comment = "order code" },
    { name = amount, type = int }
  ]
"""


def run_job(spark, text: str, ctx: SinkContext | None = None, transaction: str = "txn-0") -> list[dict]:
    """Runs a one-source job in process as the runtime does: each sink opened first, then the batch
    through the one sink protocol (a LocalFile sink stages, decides, then publishes)."""
    job = load_job_text(text)
    read = ReadContext(spark, micro_batch=False, unbounded=False, parallelism=1,
                       max_rows_per_batch=1_000_000, read_interval_ms=1, plugin_id="source[0]")
    df = job.sources[0].plugin.read(read)
    for spec in job.transforms:
        df = spec.plugin.apply(df, TransformContext(spark, "in", "out", micro_batch=False))
    states = []
    for spec in job.sinks:
        run = sink_run(spec.plugin, ctx, SinkCommitLog(tempfile.mkdtemp(prefix="seatide-commit-log-")))
        states.append(run.write(df, 0, transaction).state)
        run.end_of_data()
    return states


def assert_job(transforms: str, rules: str) -> str:
    return SOURCE + f"transform {{ {transforms} }}\nsink {{ Assert {{ rules {{ catalog_table_rule {{ {rules} }} }} }} }}"


def test_every_catalog_rule_passes_against_the_declared_schema(spark):
    # Replace keeps the fields, so the table keeps its keys through it.
    replace = 'Replace { replace_field = code, pattern = "x", replacement = "y" }'
    assert run_job(spark, assert_job(replace, RULES))[0]["rows"] == 3


@pytest.mark.parametrize("rules, words", [
    ("primary_key_rule { primary_key_name = pk_orders, primary_key_columns = [id, code] }",
     "catalog_table_rule primary_key_rule: expected primary key 'pk_orders' (id, code), "
     "the table's is 'pk_orders' (id)"),
    ("primary_key_rule { primary_key_name = pk, primary_key_columns = [id] }", "the table's is 'pk_orders' (id)"),
    ("constraint_key_rule = [{ constraint_key_name = uk_code, constraint_key_type = UNIQUE_KEY, "
     "constraint_key_columns = [{ constraint_key_column_name = code, constraint_key_sort_type = ASC }] }]",
     "constraint_key_rule: missing UNIQUE_KEY 'uk_code' (code ASC); unexpected UNIQUE_KEY 'uk_code' (code DESC)"),
    ("column_rule = [{ name = id, type = bigint, nullable = true }]",
     "column_rule: 'id' nullable is false, expected true"),
    ("column_rule = [{ name = code, type = string, column_length = 10, comment = \"code\" }]",
     "'code' column_length is 12, expected 10; 'code' comment is 'order code', expected 'code'"),
    ("column_rule = [{ name = id, type = bigint, default_value = \"1\" }]", "'id' default_value is '0', expected '1'"),
])
def test_a_broken_catalog_rule_fails_before_any_row_naming_the_rule(spark, rules, words):
    job = load_job_text(assert_job("", rules))
    with pytest.raises(AssertionFailed) as failure:
        open_sink(job.sinks[0].plugin, None)          # checked once, before the first batch
    assert words in str(failure.value)


def test_keys_survive_a_transform_only_under_their_own_names(spark):
    kept = "Filter { include_fields = [id, code] }"
    rules = ("primary_key_rule { primary_key_name = pk_orders, primary_key_columns = [id] }\n"
             "column_rule = [{ name = id, type = bigint, nullable = false }, { name = code, type = string }]")
    assert run_job(spark, assert_job(kept, rules))[0]["rows"] == 3
    renamed = "FieldMapper { field_mapper = { id = order_id, code = code } }"
    with pytest.raises(AssertionFailed, match="primary_key_rule: expected primary key 'pk_orders' "
                                              r"\(id\), the table has none"):
        open_sink(load_job_text(assert_job(renamed, rules.split("\n")[0])).sinks[0].plugin, None)
    # the renamed column keeps what was declared about it
    nullable = "column_rule = [{ name = order_id, type = bigint, nullable = false }, { name = code, type = string }]"
    assert run_job(spark, assert_job(renamed, nullable))[0]["rows"] == 3
    dropped = "Filter { exclude_fields = [code] }"
    with pytest.raises(AssertionFailed, match="constraint_key_rule: missing UNIQUE_KEY 'uk_code'"):
        open_sink(load_job_text(assert_job(dropped, "constraint_key_rule = [{ constraint_key_name = uk_code, "
                                           "constraint_key_type = UNIQUE_KEY, constraint_key_columns = "
                                           "[{ constraint_key_column_name = code }] }]")).sinks[0].plugin, None)


def test_catalog_rules_without_a_declared_schema_say_so():
    job = load_job_text("source { FakeSource { row.num = 1, schema { fields { id = bigint } } } }\n"
                        "transform { Sql { query = \"select id from dual\" } }\n"
                        "sink { Assert { rules { catalog_table_rule { "
                        "primary_key_rule { primary_key_columns = [id] } } } } }")
    with pytest.raises(AssertionFailed, match="primary_key_rule: expected primary key \\(id\\), the table has none"):
        open_sink(job.sinks[0].plugin, None)


def test_placeholders_fill_a_local_file_path_from_the_catalog(spark, tmp_path):
    text = SOURCE + f"""
    sink {{ LocalFile {{
      path = "{tmp_path}/${{database_name}}/${{schema_full_name}}/${{table_name}}_${{primary_key}}_${{unique_key}}"
      tmp_path = "{tmp_path}/tmp/${{table_full_name}}"
      file_format_type = csv
      sink_columns = ["${{field_names}}"]
    }} }}"""
    job = load_job_text(text)
    root = f"{tmp_path}/shop/shop.public/orders_id_code"
    assert str(job.sinks[0].plugin.root) == root
    assert job.sinks[0].plugin.opts["tmp_path"] == f"{tmp_path}/tmp/shop.public.orders"
    assert job.sinks[0].plugin.opts["sink_columns"] == ["id", "code", "amount"]
    ctx = SinkContext(spark, "job-cat", 1, "sink[0]", micro_batch=False, unbounded=False, stdout=None)
    run_job(spark, text, ctx)
    written = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".csv")]
    assert written and sum(len(open(f).read().splitlines()) for f in written) == 3


def test_a_placeholder_the_catalog_cannot_fill_is_a_validation_error(tmp_path):
    no_key = SOURCE.replace("primaryKey { name = pk_orders, columnNames = [id] }", "")
    with pytest.raises(ConfigError) as error:
        load_job_text(no_key + f'sink {{ LocalFile {{ path = "{tmp_path}/${{primary_key}}", file_format_type = csv }} }}')
    assert error.value.option == "path" and "${primary_key} cannot be filled" in str(error.value)
    assert "no primary key" in str(error.value)
    bare = "source { FakeSource { row.num = 1, schema { fields { id = bigint } } } }\n"
    with pytest.raises(ConfigError, match=r"\$\{table_name\} cannot be filled: the upstream table has no name"):
        load_job_text(bare + f'sink {{ LocalFile {{ path = "{tmp_path}/${{table_name}}", file_format_type = csv }} }}')
    job = load_job_text(bare + f'sink {{ LocalFile {{ path = "{tmp_path}/${{table_name:fallback}}", '
                               'file_format_type = csv } }')
    assert str(job.sinks[0].plugin.root) == f"{tmp_path}/fallback"
    with pytest.raises(ConfigError, match=r"'\$\{tablename\}' holds a \$\{\.\.\.\} that is not a sink placeholder"):
        load_job_text(bare + 'sink { Jdbc { url = "jdbc:postgresql://127.0.0.1:5432/test", table = "${tablename}" } }')


@pytest.fixture
def pg_tables():
    """Removes the tables the test creates in PostgreSQL's `test` database."""
    conn = JdbcUrl.parse("jdbc:postgresql://127.0.0.1:5432/test").connect("postgres", autocommit=True)
    names: list[str] = []
    yield names
    for name in names:
        conn.cursor().execute(f'DROP TABLE IF EXISTS public."{name}"')
        # The sinks' record table exists only once some sink made it: a fresh database (CI's) may
        # not have it when this test is the first to run, and a teardown error turns CI red.
        cursor = conn.cursor()
        cursor.execute("SELECT to_regclass('public.seatide_sink_commits')")
        if cursor.fetchone()[0] is not None:
            cursor.execute("DELETE FROM public.seatide_sink_commits WHERE transaction_id LIKE %s",
                           (f"T_{name.removeprefix('orders_')}_%",))
    conn.close()


def test_placeholders_name_a_jdbc_table_and_its_keys(spark, pg_tables):
    suffix = f"catalog_rules_{secrets.token_hex(4)}"
    pg_tables.append(f"orders_{suffix}")
    text = SOURCE + f"""
    sink {{ Jdbc {{
      url = "jdbc:postgresql://127.0.0.1:5432/test"
      driver = "org.postgresql.Driver"
      user = postgres
      database = "${{database_name}}_ignored"
      table = "public.${{table_name}}_{suffix}"
      primary_keys = ["${{primary_key}}"]
      generate_sink_sql = true
    }} }}"""
    job = load_job_text(text)
    sink = job.sinks[0].plugin
    assert sink.table == ("public", f"orders_{suffix}") and sink.keys == ("id",)
    assert sink.opts["database"] == "shop_ignored"
    # Job and transaction ids of its own: the sink's commit records in `test` outlive the table.
    ctx = SinkContext(spark, f"job-{suffix}", 1, "sink[0]", micro_batch=False, unbounded=False, stdout=None)
    run_job(spark, text.replace('database = "${database_name}_ignored"', ""), ctx, f"T_{suffix}_0")
    conn = JdbcUrl.parse("jdbc:postgresql://127.0.0.1:5432/test").connect("postgres", autocommit=True)
    try:
        cursor = conn.cursor()
        cursor.execute(f'SELECT count(*) FROM public."orders_{suffix}"')
        assert cursor.fetchone()[0] == 3
        cursor.execute("SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                       "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary",
                       (f'public."orders_{suffix}"',))
        assert [r[0] for r in cursor.fetchall()] == ["id"]
    finally:
        conn.close()


def test_each_tool_run_of_a_jdbc_sink_makes_its_own_targets_save_modes(spark, pg_tables):
    """A run opened without a save-mode key (a tool, a test) keeps its record under its own commit
    log: a key shared by all such runs said "made" for the second run's new table, which then
    failed its check ("does not exist (schema_save_mode is CREATE_SCHEMA_WHEN_NOT_EXIST)")."""
    for run in range(2):
        name = f"tool_run_{secrets.token_hex(4)}"
        pg_tables.append(name)
        text = SOURCE + f"""
    sink {{ Jdbc {{ url = "jdbc:postgresql://127.0.0.1:5432/test", driver = "org.postgresql.Driver",
      user = postgres, table = "public.{name}", primary_keys = [id], generate_sink_sql = true }} }}"""
        ctx = SinkContext(spark, f"job-{name}", 1, "sink[0]", micro_batch=False, unbounded=False, stdout=None)
        run_job(spark, text, ctx, f"T_{name}_0")   # a batch committed under "txn-0" by another test would be skipped
        conn = JdbcUrl.parse("jdbc:postgresql://127.0.0.1:5432/test").connect("postgres", autocommit=True)
        try:
            cursor = conn.cursor()
            cursor.execute(f'SELECT count(*) FROM public."{name}"')
            assert cursor.fetchone()[0] == 3, f"run {run}"
        finally:
            conn.close()


def test_the_jdbc_source_declares_its_table_and_primary_key(spark, pg_tables, tmp_path):
    name = f"src_catalog_rules_{secrets.token_hex(4)}"
    pg_tables.append(name)
    conn = JdbcUrl.parse("jdbc:postgresql://127.0.0.1:5432/test").connect("postgres", autocommit=True)
    try:
        conn.cursor().execute(f'CREATE TABLE public."{name}" (a int, b int, v text, '
                              f'CONSTRAINT "pk_{name}" PRIMARY KEY (b, a))')
        conn.cursor().execute(f'INSERT INTO public."{name}" VALUES (1, 2, \'x\')')
    finally:
        conn.close()
    job = load_job_text(f"""
    source {{ Jdbc {{ url = "jdbc:postgresql://127.0.0.1:5432/test", driver = "org.postgresql.Driver",
                     user = postgres, table_path = "public.{name}" }} }}
    sink {{
      Assert {{ rules {{ catalog_table_rule {{
        primary_key_rule {{ primary_key_name = "pk_{name}", primary_key_columns = [b, a] }} }} }} }}
      LocalFile {{ path = "{tmp_path}/${{table_full_name}}/${{primary_key}}", file_format_type = csv }}
    }}""")
    open_sink(job.sinks[0].plugin, None)        # passes: the key, in key order, under its name
    assert str(job.sinks[1].plugin.root) == f"{tmp_path}/test.public.{name}/b,a"
