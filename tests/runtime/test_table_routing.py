"""runtime.table_routing: a batch's tables are built as frames only for a sink that reads them."""

from __future__ import annotations

from seatide.runtime.table_routing import _Frames


def test_asking_which_tables_a_batch_has_builds_no_frame():
    """A sink that writes the collected rows (TableFrames.local) checks which tables have rows;
    at 100 tables, building each one's frame to answer cost ≈3 s a batch in Spark's analysis."""
    built = []
    frames = _Frames([3, 7], lambda index: built.append(index) or f"frame {index}")
    assert 3 in frames and 7 in frames and 5 not in frames
    assert sorted(frames) == [3, 7] and len(frames) == 2
    assert built == []
    assert frames[7] == "frame 7" and frames[7] == "frame 7"
    assert built == [7]                     # built once, when read


def _routed(spark, tables: int = 2):
    """A multi-table pipeline whose source's batches cannot be taken apart without being read
    (as a CDC source's), and a batch frame of its tagged shape."""
    from pyspark.sql import types as T

    from seatide.config.loader import load_job_text
    from seatide.plan.dag import build_plan
    from seatide.plugin.base import ReadContext
    from seatide.plugin.tables import TableLayout
    from seatide.runtime.table_routing import RoutedPipeline

    names = ",".join(f"test.public.unreached_{i}" for i in range(tables))
    job = load_job_text('env { job.mode = "STREAMING" }\nsource { Postgres-CDC { base-url = '
                        '"jdbc:postgresql://127.0.0.1:1/test", username = "u", password = "", '
                        f'table-names = ["{names}"], connect.timeout.ms = 1000 }} }}\nsink {{ Console {{}} }}')
    pipeline = build_plan(job).pipelines[0]
    ctx = ReadContext(spark, micro_batch=True, unbounded=True, parallelism=1, max_rows_per_batch=100,
                      read_interval_ms=100, plugin_id="source[0]")
    routed = RoutedPipeline(spark, pipeline, ctx)
    shape = T.StructType([T.StructField("id", T.IntegerType()), T.StructField("body", T.StringType())])
    routed.layout = TableLayout.of((f"t{i}", shape) for i in range(tables))
    return routed, routed.layout.spark_schema(sequenced=True)


def _batch(spark, schema, bodies: list[tuple[int, int]]):
    """A batch of (table, body size) rows, in the tagged shape."""
    rows = [(table, 0, n, *[(n, "x" * size) if i == table else None for i in range(2)])
            for n, (table, size) in enumerate(bodies)]
    return spark.createDataFrame(rows, schema)


def test_a_batch_over_the_byte_bound_goes_the_spark_path_and_is_counted(spark, monkeypatch):
    """Finding 13 of issue 30: the collected path was bounded by rows alone, so a few thousand
    rows of megabytes failed the collect or filled the driver on every replay. Bounded by bytes
    too, such a batch is counted by Spark and written table by table from Spark's frames."""
    from seatide.runtime import table_routing

    monkeypatch.setattr(table_routing, "LOCAL_BATCH_BYTES", 2 << 20, raising=False)
    routed, schema = _routed(spark)
    rows = routed.rows(_batch(spark, schema, [(0, 1 << 20)] * 3 + [(1, 10)] * 2))
    try:
        assert rows.local is None
        assert rows.counts == {0: 3, 1: 2} and rows.tables == (0, 1)
    finally:
        routed.release(rows)


def test_a_few_large_rows_within_the_byte_bound_are_still_collected(spark, monkeypatch):
    """The bound is on the batch's bytes, not a row's: a large row in a small batch is collected
    (its size is the persisted batch's, as Spark measured it while counting it)."""
    from seatide.runtime import table_routing

    monkeypatch.setattr(table_routing, "LOCAL_BATCH_BYTES", 2 << 20, raising=False)
    routed, schema = _routed(spark)
    rows = routed.rows(_batch(spark, schema, [(0, 300_000), (1, 10), (0, 20)]))
    try:
        assert rows.local is not None and rows.counts == {0: 2, 1: 1}
        assert [len(r["__seatide_t0"]["body"]) for r in rows.local[0]] == [300_000, 20]
    finally:
        routed.release(rows)


def test_a_batch_of_large_rows_is_cached_in_small_buffers_and_not_collected(spark, monkeypatch):
    """One transaction of megabyte rows: Spark caches a persisted batch in buffers of 10,000 rows,
    gigabytes of such rows in one; told its rows' size, the runtime caches it in buffers of about
    CACHE_BUFFER_BYTES (and leaves the session's setting as it found it)."""
    from seatide.plugin.tables import TableRows
    from seatide.runtime import table_routing

    monkeypatch.setattr(table_routing, "LOCAL_BATCH_BYTES", 2 << 20)
    routed, schema = _routed(spark)
    frame = _batch(spark, schema, [(0, 10), (1, 10), (1, 10), (0, 10), (0, 10)]).coalesce(1)
    monkeypatch.setattr(routed.source.plugin, "batch_rows",
                        lambda df, ctx, offsets: TableRows(df, least_bytes=3 << 20, row_bytes=8 << 20))
    rows = routed.rows(frame)
    try:
        assert rows.local is None and rows.counts == {0: 3, 1: 2}
        buffers = rows.frame._jdf.queryExecution().optimizedPlan().cacheBuilder().cachedColumnBuffers().count()
        assert buffers == 3                           # 16 MiB a buffer: two rows of 8 MiB at most (not 10,000)
        assert spark.conf.get("spark.sql.inMemoryColumnarStorage.batchSize", None) is None
    finally:
        routed.release(rows)
