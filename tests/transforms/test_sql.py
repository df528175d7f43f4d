"""Sql: SeaTunnel queries on Spark SQL, row kinds, isolation, and bad queries."""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.plugin.rowkind import ROW_KIND_COLUMN, RowKind
from seatide.transforms.fields import TransformInputError
from tests.transforms.conftest import frame, job_text, rows_of, transform_from

I, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE
SCHEMA = "id int, name string, age int"
ROWS = [(1, "Joy Ding", 20, I), (2, "May Ding", 21, UB), (3, "Kin Dom", 24, UA), (4, "Joy Dom", 22, D)]


def sql(query: str):
    return transform_from(f'Sql {{ plugin_input = "fake", query = """{query}""" }}')


@pytest.fixture
def people(spark):
    return frame(spark, ROWS, SCHEMA)


def test_seatunnel_doc_example_keeps_each_rows_kind(people, ctx):
    out = sql("select id, concat(name, '_') as name, age+1 as age from fake where id>0").apply(people, ctx)
    assert out.columns == ["id", "name", "age", ROW_KIND_COLUMN]
    assert rows_of(out) == [(1, "Joy Ding_", 21, I), (2, "May Ding_", 22, UB),
                            (3, "Kin Dom_", 25, UA), (4, "Joy Dom_", 23, D)]


def test_select_star_carries_the_row_kind_hidden_and_last(people, ctx):
    out = sql("select * from fake where age > 21").apply(people, ctx)
    assert out.columns == ["id", "name", "age", ROW_KIND_COLUMN]
    assert rows_of(out) == [(3, "Kin Dom", 24, UA), (4, "Joy Dom", 22, D)]


def test_aggregate_rows_are_inserts_and_do_not_see_the_row_kind(people, ctx):
    transform = sql("select distinct * from fake")
    assert transform.row_kinds(frozenset(RowKind)) == frozenset({I})
    out = transform.apply(people, ctx)
    assert out.columns == ["id", "name", "age", ROW_KIND_COLUMN]
    assert {r[-1] for r in rows_of(out)} == {I}
    grouped = sql("select substring(name, 1, 3) as who, count(*) as n from fake group by 1").apply(people, ctx)
    assert rows_of(grouped) == [("Joy", 2, I), ("Kin", 1, I), ("May", 1, I)]


def test_lateral_view_keeps_the_kind_of_the_row_it_came_from(people, ctx):
    out = sql("select id, part from fake LATERAL VIEW EXPLODE(SPLIT(name, ' ')) AS part "
              "where id >= 3").apply(people, ctx)
    assert rows_of(out) == [(3, "Dom", UA), (3, "Kin", UA), (4, "Dom", D), (4, "Joy", D)]


def test_subquery_and_cte_projections_keep_row_kinds(people, ctx):
    sub = sql("select n from (select upper(name) as n, id from fake) t where t.id = 4").apply(people, ctx)
    assert rows_of(sub) == [("JOY DOM", D)]
    cte = sql("with young as (select id, name from fake where age < 22) select name from young").apply(people, ctx)
    assert rows_of(cte) == [("Joy Ding", I), ("May Ding", UB)]


def test_a_subquery_in_an_expression_keeps_row_kinds(people, ctx):
    transform = sql("select id from fake where age = (select max(age) from fake)")
    assert transform.row_kinds(frozenset(RowKind)) == frozenset(RowKind)
    assert rows_of(transform.apply(people, ctx)) == [(3, UA)]


def test_query_may_choose_the_row_kind_itself(people, ctx):
    out = sql("select id, cast(0 as tinyint) as __row_kind from fake where id = 4").apply(people, ctx)
    assert rows_of(out) == [(4, I)]


def test_table_qualified_columns_and_aliases_resolve(people, ctx):
    assert rows_of(sql("select fake.id from fake where fake.age = 20").apply(people, ctx)) == [(1, I)]
    assert rows_of(sql("select f.id from fake as f where f.age = 21").apply(people, ctx)) == [(2, UB)]


def test_a_single_table_is_the_input_whatever_its_name(people, ctx):
    out = sql("select id from source_table where id = 1").apply(people, ctx)
    assert rows_of(out) == [(1, I)]


def test_two_unknown_tables_are_an_error_naming_the_input(people, ctx):
    with pytest.raises(TransformInputError, match="must read its input with FROM fake; it reads a, b"):
        sql("select * from a join b on a.id = b.id").apply(people, ctx)


def test_unknown_field_names_the_transform_and_lists_fields(people, ctx):
    with pytest.raises(TransformInputError) as err:
        sql("select nope from fake").apply(people, ctx)
    text = str(err.value)
    assert text.startswith("Sql: the query does not run on its input")
    assert "nope" in text and "has fields: id, name, age" in text
    assert "__seatide_sql" not in text


def test_seatunnel_functions_run_on_spark(spark, ctx):
    df = frame(spark, [(" ab ", "2021-04-08 13:34:45", None, 1672502400, 7.89, I)],
               "s string, t string, n string, u bigint, x double")
    query = """select
        CONCAT(s, n, 'z') as c1, CONCAT_WS(',', 'a', n, 1) as c2, LTRIM('xxaxx', 'x') as c3,
        RTRIM('xxaxx', 'x') as c4, TRIM(s) as c5, INSERT('abcdef', 2, 1, 'X') as c6,
        INSTR('abcb', 'b', 3) as c7, LCASE('AB') as c8, UCASE('ab') as c9,
        REGEXP_REPLACE('Hello WWWWorld', 'w+', 'W', 'i') as c10,
        REGEXP_LIKE('Hello', 'h', 'i') as c11,
        REGEXP_SUBSTR('2020-10-01', '(\\d{4})-(\\d{2})-(\\d{2})', 1, 1, NULL, 2) as c12,
        REGEXP_SUBSTR('2020-10-01', '\\d{4}') as c13,
        PARSEDATETIME(t, 'yyyy-MM-dd HH:mm:ss') as c14, TO_DATE(t, 'yyyy-MM-dd HH:mm:ss') as c15,
        FORMATDATETIME(PARSEDATETIME(t, 'yyyy-MM-dd HH:mm:ss'), 'yyyy/MM/dd') as c16,
        IS_DATE(t, 'yyyy-MM-dd HH:mm:ss') as c17, IS_DATE('nope', 'yyyy-MM-dd') as c18,
        DATEADD(CAST('2020-01-31 00:00:00' AS TIMESTAMP), 1, 'MONTH') as c19,
        DATEDIFF(CAST('2023-01-31 10:00:00' AS TIMESTAMP), CAST('2023-02-01 09:00:00' AS TIMESTAMP), 'MONTH') as c20,
        DAYNAME(DATE '2024-01-01') as c21, MONTHNAME(DATE '2024-01-01') as c22,
        DAY_OF_WEEK(DATE '2024-01-07') as c23, EXTRACT(DOW FROM DATE '2024-01-07') as c24,
        FROM_UNIXTIME(u, 'yyyy-MM-dd HH:mm:ss', 'UTC+6') as c25, TO_CHAR(true) as c26,
        TRUNC(x, 1) as c27, TRUNCATE(-x) as c28, MULTI_IF(x > 10, 'big', x > 5, 'mid', 'small') as c29,
        CAST(s AS BYTES) as c30, IFNULL(n, 'd') as c31, NVL(n, 'e') as c32,
        DATE_TRUNC(CAST('2020-05-17 10:11:12' AS TIMESTAMP), 'MONTH') as c33, WEEK(DATE '2024-01-01') as c34,
        RAWTOHEX('A') as c35, HEXTORAW('0041') as c36, "s" as c37
        from fake"""
    row = sql(query).apply(df, ctx).collect()[0]
    assert row.c1 == " ab z" and row.c2 == "a,1" and row.c3 == "axx" and row.c4 == "xxa"
    assert row.c5 == "ab" and row.c6 == "aXcdef" and row.c7 == 4 and (row.c8, row.c9) == ("ab", "AB")
    assert row.c10 == "Hello World" and row.c11 is True and row.c12 == "10" and row.c13 == "2020"
    assert row.c14 == row.c15 == dt.datetime(2021, 4, 8, 13, 34, 45) and row.c16 == "2021/04/08"
    assert (row.c17, row.c18) == (True, False)
    assert row.c19 == dt.datetime(2020, 2, 29) and row.c20 == 1
    assert (row.c21, row.c22, row.c23, row.c24) == ("Monday", "January", 7, 0)
    assert row.c25 == "2022-12-31 22:00:00" and row.c26 == "true"
    assert float(row.c27) == 7.8 and float(row.c28) == -7.0 and row.c29 == "mid"
    assert bytes(row.c30) == b" ab " and (row.c31, row.c32) == ("d", "e")
    assert row.c33 == dt.datetime(2020, 5, 1) and row.c34 == 1
    assert (row.c35, row.c36, row.c37) == ("0041", "A", " ab ")


def test_backslashes_in_literals_stay_as_written(spark, ctx):
    df = frame(spark, [("a\\b", I)], "s string")
    row = sql(r"select s = 'a\b' as same, REGEXP_REPLACE(s, '\\', '/') as slash from fake").apply(df, ctx).collect()[0]
    assert row.same is True and row.slash == "a/b"


def test_pipelines_in_one_session_do_not_share_table_names(spark, ctx):
    """Two Sql transforms reading different data under the same name, analyzed concurrently."""
    left = frame(spark, [(1, I)], "v int")
    right = frame(spark, [(2, D)], "v int")
    transform = sql("select v * 10 as v from fake")
    results: dict[str, object] = {}

    def run(name, df):
        for _ in range(5):
            results[name] = transform.apply(df, ctx)

    threads = [threading.Thread(target=run, args=("l", left)), threading.Thread(target=run, args=("r", right))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert rows_of(results["l"]) == [(10, I)] and rows_of(results["r"]) == [(20, D)]
    names = [t.name for t in spark.catalog.listTables() if t.name.startswith("__seatide_sql")]
    assert names == []      # views are dropped once analyzed


def test_sql_on_a_stream_keeps_row_kinds(stream):
    records = [{"id": 1, "name": "a", "kind": 0}, {"id": 2, "name": "b", "kind": 3}]
    rows = stream.run(records, "id int, name string", sql("select id, upper(name) as name from fake"))
    assert rows == [(1, "A", I), (2, "B", D)]
    assert stream.columns == ["id", "name", ROW_KIND_COLUMN]


def test_row_kinds_pass_validation_only_for_aggregates(spark):
    block = 'Sql { plugin_input = "fake", query = "select name, count(*) as n from fake group by name" }'
    load_job_text(job_text(block, kinds="INSERT, DELETE", accepts="INSERT"))
    per_row = 'Sql { plugin_input = "fake", query = "select id from fake" }'
    with pytest.raises(ConfigError, match="cannot apply DELETE"):
        load_job_text(job_text(per_row, kinds="INSERT, DELETE", accepts="INSERT"))


@pytest.mark.parametrize("query, message", [
    ("", "option 'query' is empty"),
    ("select 'x from fake", "quote opened at character 8 is never closed"),
    ("select (id from fake", "Expecting ) at line 1, column 15"),
    ("delete from fake", "must be a SELECT query"),
    ("select 1", "the query reads no table"),
    ("with t as (select 1 as x) select x from t", "the query reads no table"),
    ("select DATEADD(t, 1, 'FORTNIGHT') from fake", "DATEADD: unknown unit 'FORTNIGHT'"),
    ("select REGEXP_LIKE(s, 'a', 'q') from fake", "unknown flag 'q'"),
    ("select MULTI_IF(a, 1) from fake", "MULTI_IF takes condition"),
])
def test_bad_queries_fail_validation_naming_plugin_and_option(query, message):
    with pytest.raises(ConfigError) as err:
        load_job_text(job_text(f'Sql {{ plugin_input = "fake", query = """{query}""" }}'))
    assert err.value.plugin == "transform[0] Sql" and err.value.option == "query"
    assert message in str(err.value)


@pytest.mark.parametrize("query, merges", [
    ("select id, upper(name) from fake where id > 1", False),
    ("select id, part from fake LATERAL VIEW EXPLODE(SPLIT(name, ' ')) AS part", False),
    ("select id from fake where id in (select max(id) from fake)", False),
    ("select id, (select count(*) from fake) as n from fake", False),
    ("select n from (select upper(name) as n from fake) t", False),
    ("select name, count(*) from fake group by name", True),
    ("select distinct name from fake", True),
    ("select count(*) from fake", True),
    ("select id, row_number() over (order by id) from fake", True),
    ("select a.id from fake a join fake b on a.id = b.id", True),
    ("select id from fake union all select id from fake", True),
    ("select n from (select name as n, count(*) as c from fake group by name) t", True),
    ("with g as (select max(id) as m from fake) select m from g", True),
])
def test_row_merging_is_read_from_the_query_tree(query, merges):
    from seatide.sql.dialect import parse_query
    from seatide.sql.tree import merges_rows

    assert merges_rows(parse_query(query)) is merges


def test_missing_query_option_is_reported():
    with pytest.raises(ConfigError) as err:
        load_job_text(job_text('Sql { plugin_input = "fake" }'))
    assert err.value.option == "query" and "required option 'query' is missing" in str(err.value)


def test_translation_never_touches_literals_or_comments():
    from seatide.sql.dialect import parse_query, to_spark
    from seatide.sql.translate import translate_calls
    from seatide.sql.tree import input_tables

    query = "select 'CONCAT(a)' as s, /* LCASE(DATEADD(x)) */ DATEADD(t, 1, 'days') from fake"
    text = to_spark(translate_calls(parse_query(query), {}))
    assert text == "SELECT 'CONCAT(a)' AS s /* LCASE(DATEADD(x)) */, (t + MAKE_INTERVAL(0, 0, 0, 1)) FROM fake"
    tree = parse_query("select EXTRACT(YEAR FROM created), trim(BOTH 'x' FROM s) from `fake` f")
    assert [(r.name, r.node.alias) for r in input_tables(tree)] == [("fake", "f")]


def test_spark_does_not_fill_env_or_system_references_into_a_query(people, ctx, spark):
    # HOCON's \u0024 gets "${" past SeaTide's own variable filling: with Spark's SQL
    # substitution on, the driver put its own $HOME and user name into the row, which a job
    # submitted over REST could read back (a worker's PGPASSWORD just the same).
    plugin = transform_from(r'Sql { plugin_input = "fake", query = "select id, '
                            r"'\u0024{env:HOME}' as home, 'x\u0024{system:user.name}y' as who, "
                            r"'lit \u0024{HOME} end' as lit from fake where id = 1" + '" }')
    assert rows_of(plugin.apply(people, ctx)) == [(1, "${env:HOME}", "x${system:user.name}y", "lit ${HOME} end", I)]
    assert spark.conf.get("spark.sql.variable.substitute") == "false"


def test_a_job_may_not_turn_sparks_sql_substitution_on():
    with pytest.raises(ConfigError, match="'spark.sql.variable.substitute' cannot be turned on"):
        load_job_text(job_text('Sql { plugin_input = "fake", query = "select * from fake" }')
                      .replace('job.mode = "BATCH"', 'job.mode = "BATCH", spark.sql.variable.substitute = true'))
