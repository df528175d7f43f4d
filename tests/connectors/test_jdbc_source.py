"""Jdbc source on real PostgreSQL and MariaDB: parallel reads with Spark's JDBC reader,
checkpointed split-by-split reads that resume without reading a split twice, and option checks."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import secrets

import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.connectors.jdbc.splits import DATE, NUMBER, SplitPlan, plan_splits
from seatide.connectors.jdbc.url import JdbcUrl
from seatide.plugin.base import ReadContext
from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.runtime.offset_log import batch_offsets

URLS = {"postgresql": "jdbc:postgresql://127.0.0.1:5432/test?user=postgres",
        "mariadb": "jdbc:mariadb://127.0.0.1:3306/test?user=root"}
ROWS = 300


def execute(dialect: str, *statements: str) -> None:
    with JdbcUrl.parse(URLS[dialect]).connect(autocommit=True) as conn:
        cursor = conn.cursor()
        for statement in statements:
            cursor.execute(statement)


@pytest.fixture(params=sorted(URLS))
def table(request):
    """A table of ROWS rows (id 1..ROWS, day, name, amount) of its own, dropped afterwards."""
    dialect = request.param
    name = f"jdbc_source_{secrets.token_hex(4)}"
    if dialect == "postgresql":
        day, numbers = "DATE '2024-01-01' + g % 50", f"generate_series(1, {ROWS}) g"
    else:
        day, numbers = "DATE_ADD('2024-01-01', INTERVAL g % 50 DAY)", f"(SELECT seq AS g FROM seq_1_to_{ROWS}) s"
    execute(dialect, f"CREATE TABLE {name} (id int PRIMARY KEY, day date, name varchar(20), amount decimal(10,2))",
            f"INSERT INTO {name} SELECT g, {day}, concat('n', g), g / 4.0 FROM {numbers}")
    yield dialect, name
    execute(dialect, f"DROP TABLE IF EXISTS {name}")


def jdbc(dialect: str, body: str, parallelism: int = 2):
    job = load_job_text(f"env {{ parallelism = {parallelism} }}\n"
                        f"source {{ Jdbc {{\nurl = \"{URLS[dialect]}\"\n{body}\n}} }}\nsink {{ Console {{}} }}")
    return job.sources[0].plugin


def batch_ctx(spark) -> ReadContext:
    return ReadContext(spark, micro_batch=False, unbounded=False, parallelism=2,
                       max_rows_per_batch=1_000_000, read_interval_ms=1000, plugin_id="source[0]")


def stream_ctx(spark, max_rows: int) -> ReadContext:
    return ReadContext(spark, micro_batch=True, unbounded=False, parallelism=2,
                       max_rows_per_batch=max_rows, read_interval_ms=1000, plugin_id="source[0]")


def run_available_now(df, checkpoint: str, batches: dict, fail_on_batch: int | None = None):
    """Run a micro-batch query to its end; ``batches[id]`` = its ids, sorted (a replay overwrites)."""
    def each_batch(batch_df, batch_id):
        batches[batch_id] = sorted(r.id for r in batch_df.collect())
        if batch_id == fail_on_batch:
            raise RuntimeError("injected failure before the batch commits")

    query = (df.writeStream.trigger(availableNow=True).option("checkpointLocation", checkpoint)
             .foreachBatch(each_batch).start())
    query.awaitTermination()


def all_ids(batches: dict) -> list[int]:
    return sorted(i for ids in batches.values() for i in ids)


# -- parallel (plain BATCH) ---------------------------------------------------------------
def test_parallel_read_splits_by_partition_column_and_returns_every_row_once(spark, table):
    dialect, name = table
    df = jdbc(dialect, f'table_path = "{name}"\npartition_column = "id"\npartition_num = 4').read(batch_ctx(spark))
    assert df.rdd.getNumPartitions() == 4
    rows = df.collect()
    assert sorted(r.id for r in rows) == list(range(1, ROWS + 1))
    assert {r[ROW_KIND_COLUMN] for r in rows} == {0}
    by_id = {r.id: r for r in rows}
    assert by_id[7].name == "n7" and str(by_id[7].amount) == "1.75"


def test_parallel_read_applies_where_condition_and_query(spark, table):
    dialect, name = table
    where = jdbc(dialect, f'table_path = "{name}"\nwhere_condition = "where id > 250"\npartition_column = id\n'
                          "partition_num = 3")
    assert sorted(r.id for r in where.read(batch_ctx(spark)).collect()) == list(range(251, ROWS + 1))
    query = jdbc(dialect, f'query = "select id, name from {name} where id % 3 = 0"\npartition_column = "id"\n'
                          "split.size = 20")
    df = query.read(batch_ctx(spark))
    assert df.columns == ["id", "name", ROW_KIND_COLUMN]
    # Without partition_num, Spark's reader gets one range per task slot (2 cores), whatever split.size
    assert df.rdd.getNumPartitions() == 2
    assert sorted(r.id for r in df.collect()) == list(range(3, ROWS + 1, 3))


def test_table_path_splits_by_primary_key_and_bounds_limit_the_rows(spark, table):
    dialect, name = table
    source = jdbc(dialect, f'table_path = "{name}"\nsplit.size = 100')
    assert source.partition.name == "id"
    assert source.read(batch_ctx(spark)).rdd.getNumPartitions() == 2
    bounded = jdbc(dialect, f'table_path = "{name}"\npartition_column = day\npartition_lower_bound = "2024-01-11"\n'
                            'partition_upper_bound = "2024-01-20"\npartition_num = 2')
    ids = sorted(r.id for r in bounded.read(batch_ctx(spark)).collect())
    assert ids == [i for i in range(1, ROWS + 1) if 10 <= i % 50 <= 19]


# -- checkpointed (split by split) --------------------------------------------------------
def test_checkpointed_read_returns_every_row_once_in_bounded_batches(spark, table, tmp_path):
    dialect, name = table
    source = jdbc(dialect, f'table_path = "{name}"\nsplit.size = 25')
    batches: dict[int, list] = {}
    run_available_now(source.read(stream_ctx(spark, max_rows=60)), str(tmp_path / "ck"), batches)
    assert all_ids(batches) == list(range(1, ROWS + 1))
    assert len(batches) == 6                         # 12 splits of 25 rows, 2 splits per batch
    assert max(len(ids) for ids in batches.values()) <= 60


def test_restart_reads_only_the_splits_after_the_last_commit(spark, table, tmp_path):
    dialect, name = table
    body = f'table_path = "{name}"\npartition_column = "id"\nsplit.size = 50'
    checkpoint = str(tmp_path / "ck")
    batches: dict[int, list] = {}
    with pytest.raises(Exception, match="injected failure"):
        run_available_now(jdbc(dialect, body).read(stream_ctx(spark, max_rows=50)), checkpoint, batches,
                          fail_on_batch=2)
    committed = {k: v for k, v in batches.items() if k < 2}
    failed_attempt = batches.pop(2)
    # Rows that arrive after the plan was fixed: beyond its upper bound, and inside a split not yet read.
    execute(dialect, f"INSERT INTO {name} (id, name) VALUES ({ROWS + 1}, 'late'), ({ROWS + 500}, 'later')",
            f"DELETE FROM {name} WHERE id = 290")
    resumed: dict[int, list] = {}
    run_available_now(jdbc(dialect, body).read(stream_ctx(spark, max_rows=50)), checkpoint, resumed)
    assert min(resumed) == 2 and resumed[2] == failed_attempt      # the failed batch is replayed as it was
    ids = all_ids({**committed, **resumed})
    assert ids == [i for i in range(1, ROWS + 1) if i != 290]       # no split read twice, plan unchanged
    assert len(resumed) == 4


def test_streaming_job_reads_its_splits_then_idles(spark, table, tmp_path):
    dialect, name = table
    df = jdbc(dialect, f'table_path = "{name}"\nsplit.size = 100').read(
        ReadContext(spark, micro_batch=True, unbounded=True, parallelism=2, max_rows_per_batch=1000,
                    read_interval_ms=100, plugin_id="source[0]"))
    seen: list[int] = []
    query = (df.writeStream.option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="100 milliseconds")
             .foreachBatch(lambda batch, _: seen.extend(r.id for r in batch.collect())).start())
    try:
        query.processAllAvailable()
        assert sorted(seen) == list(range(1, ROWS + 1))
        query.processAllAvailable()                  # nothing new: the source is bounded
        assert len(seen) == ROWS
    finally:
        query.stop()


# -- checkpointed, as a job runs it: descriptors in the stream, rows by Spark's JDBC reader ------
def routed_ctx(spark, max_rows: int) -> ReadContext:
    return ReadContext(spark, micro_batch=True, unbounded=False, parallelism=2, max_rows_per_batch=max_rows,
                       read_interval_ms=1000, plugin_id="source[0]", expand_batches=True)


def run_routed(source, ctx, checkpoint: str, batches: dict, fail_on_batch: int | None = None):
    """Run the source's descriptor stream to its end as a job does (``batch_rows`` in foreachBatch);
    ``batches[id]`` = the batch's ids, sorted. The stream's own rows are never to be read: the
    batch's offsets, as Spark logged them, say which splits it holds."""
    def each_batch(batch_df, batch_id):
        unreadable = batch_df.where("raise_error('the split descriptors were read by a Spark job') IS NULL")
        rows = source.batch_rows(unreadable, ctx, batch_offsets(os.path.join(checkpoint, "spark"), batch_id))
        batches[batch_id] = sorted(r.id for frame in rows.per_table.values() for r in frame.collect())
        if batch_id == fail_on_batch:
            raise RuntimeError("injected failure before the batch commits")

    query = (source.read(ctx).writeStream.trigger(availableNow=True)
             .option("checkpointLocation", os.path.join(checkpoint, "spark")).foreachBatch(each_batch).start())
    query.awaitTermination()


def test_a_batch_s_splits_come_from_its_logged_offsets_and_every_row_is_read_once(spark, table, tmp_path):
    dialect, name = table
    batches: dict[int, list] = {}
    run_routed(jdbc(dialect, f'table_path = "{name}"\nsplit.size = 25'), routed_ctx(spark, max_rows=60),
               str(tmp_path / "ck"), batches)
    assert all_ids(batches) == list(range(1, ROWS + 1))
    assert len(batches) == 6                         # 12 splits of 25 rows, 2 splits per batch


def test_a_table_within_the_row_limit_is_read_in_one_batch(spark, table, tmp_path):
    dialect, name = table
    # 43 splits of 6.98 rows: counted as 7 rows each they would make 301 and a second batch
    batches: dict[int, list] = {}
    run_routed(jdbc(dialect, f'table_path = "{name}"\nsplit.size = 7'), routed_ctx(spark, max_rows=ROWS),
               str(tmp_path / "ck"), batches)
    assert list(batches) == [0] and batches[0] == list(range(1, ROWS + 1))


def test_a_fresh_stream_is_planned_when_the_job_reads_the_source(spark, table, tmp_path):
    dialect, name = table
    source = jdbc(dialect, f'table_path = "{name}"\nsplit.size = 100')
    stream = source.read(routed_ctx(spark, max_rows=1000))
    # measured by the driver as the job builds its plan, not by the stream's Python process at its start
    execute(dialect, f"INSERT INTO {name} (id, name) VALUES ({ROWS + 1}, 'after the plan')")
    batches: dict[int, list] = {}
    checkpoint = str(tmp_path / "ck")

    def each_batch(batch_df, batch_id):
        rows = source.batch_rows(batch_df, routed_ctx(spark, 1000), batch_offsets(checkpoint, batch_id))
        batches[batch_id] = sorted(r.id for frame in rows.per_table.values() for r in frame.collect())

    stream.writeStream.trigger(availableNow=True).option("checkpointLocation", checkpoint) \
        .foreachBatch(each_batch).start().awaitTermination()
    assert all_ids(batches) == list(range(1, ROWS + 1))


def routed_restart(spark, dialect: str, body: str, checkpoint: str, between=lambda: None):
    """A routed read of 100-row batches that fails before batch 1 commits, ``between()``, then
    resumed: (the committed batches, the failed attempt's ids, the resumed batches)."""
    batches: dict[int, list] = {}
    with pytest.raises(Exception, match="injected failure"):
        run_routed(jdbc(dialect, body), routed_ctx(spark, max_rows=100), checkpoint, batches, fail_on_batch=1)
    failed_attempt = batches.pop(1)
    between()
    resumed: dict[int, list] = {}
    run_routed(jdbc(dialect, body), routed_ctx(spark, max_rows=100), checkpoint, resumed)
    return batches, failed_attempt, resumed


def test_a_routed_restart_replays_the_failed_batch_and_reads_no_split_twice(spark, table, tmp_path):
    dialect, name = table
    body = f'table_path = "{name}"\npartition_column = "id"\nsplit.size = 50'
    batches, failed_attempt, resumed = routed_restart(spark, dialect, body, str(tmp_path / "ck"), lambda: execute(
        dialect, f"INSERT INTO {name} (id, name) VALUES ({ROWS + 1}, 'late')", f"DELETE FROM {name} WHERE id = 290"))
    assert min(resumed) == 1 and resumed[1] == failed_attempt      # the failed batch is replayed as it was
    assert all_ids({**batches, **resumed}) == [i for i in range(1, ROWS + 1) if i != 290]
    assert sorted(resumed) == [1, 2]


# -- option checks through the job loader ---------------------------------------------
@pytest.mark.parametrize("body, option, text", [
    ('user = "x"', "query", "needs `query`"),
    ('query = "select 1 as a"\ntable_list = [{ table_path = "a.b" }]', "query", "give table_list or query, not both"),
    ('table_list = [{ query = "select 1 as a" }]', "table_list[0]", "needs table_path"),
    ('query = "select 1 as a"\nwhere_condition = "id > 1"', "where_condition", "must start with `where`"),
    ('query = "select 1 as a, current_timestamp as s"\npartition_column = "s"', "partition_column",
     "numeric, date or character"),
    ('query = "select 1 as a"\npartition_column = "nope"', "partition_column", "not a column"),
    ('query = "select * from no_such_table_jdbc_source"', "query", "rejected"),
    ('query = "select 1 as a"\nsplit.size = 0', "split.size", "at least 1"),
])
@pytest.mark.parametrize("dialect", sorted(URLS))
def test_bad_options_are_refused_with_the_option_named(dialect, body, option, text):
    with pytest.raises(ConfigError) as info:
        jdbc(dialect, body)
    assert info.value.option == option
    assert text in str(info.value)


def test_unknown_dialect_url_is_refused():
    with pytest.raises(ConfigError, match="jdbc:postgresql://host:5432/db") as info:
        load_job_text('source { Jdbc { url = "jdbc:oracle:thin:@h:1521/x", query = "select 1" } }\n'
                      "sink { Console {} }")
    assert info.value.option == "url"


# -- split planning ------------------------------------------------------------------------
@pytest.mark.parametrize("lower, upper, rows, partition_num, expected_count", [
    (1, 1000, 1000, None, 10), (1, 1000, 1000, 7, 7), (5, 7, 900, None, 3), (-3.5, 2.5, 10, 4, 4)])
def test_split_plan_covers_every_value_once(lower, upper, rows, partition_num, expected_count):
    plan = plan_splits("id", NUMBER, lower, upper, rows, split_size=100, partition_num=partition_num)
    assert plan.count == expected_count                     # never wider than the value range
    covered = [v for i in range(plan.count) for v in range(plan.bound(i), plan.bound(i + 1))]
    assert covered == list(range(math.floor(lower), math.ceil(upper) + 1))
    assert SplitPlan.from_json(json.loads(json.dumps(plan.to_json()))) == plan


def test_date_plan_bounds_are_dates_and_first_split_takes_nulls():
    plan = plan_splits("day", DATE, dt.date(2024, 1, 1), dt.date(2024, 1, 10), 10, split_size=5, partition_num=None)
    assert plan.count == 2 and plan.spark_bounds() == ("2024-01-01", "2024-01-11")
    assert plan.condition(0, 1, '"day"') == ("(\"day\" >= DATE '2024-01-01' AND \"day\" < DATE '2024-01-06') "
                                             "OR \"day\" IS NULL")
    assert plan.condition(1, 2, '"day"') == "\"day\" >= DATE '2024-01-06' AND \"day\" < DATE '2024-01-11'"


@pytest.mark.parametrize("rows, count", [(1_000_000, 124), (300, 43), (10, 4), (5, 9), (0, 3)])
def test_a_batch_takes_the_most_whole_splits_its_rows_hold(rows, count):
    plan = SplitPlan("id", NUMBER, 1, 10_000, count, rows)
    assert plan.rows_between(0, count) == rows                       # the splits hold the plan's rows exactly
    for first in range(count):
        for max_rows in (1, 3, 7, rows // 3, rows):
            stop = plan.splits_within(first, max_rows)
            fitting = [s for s in range(first + 1, count + 1) if plan.rows_between(first, s) <= max_rows]
            assert stop == max(fitting, default=first + 1)
