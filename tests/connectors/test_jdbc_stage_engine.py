"""Which frames a keyless MySQL/MariaDB sink may stage into MyISAM: those that read no shuffle
(staging.py). The answer is taken from the analysed plan where it surely has no shuffle, and
from the physical plan otherwise; both must agree with the physical plan on every frame."""

from __future__ import annotations

from seatide.connectors.jdbc.staging import _reads_a_shuffle, _without_shuffle


def _frames(spark):
    from pyspark.sql import functions as F

    base = spark.range(100).withColumnRenamed("id", "k")
    rows = spark.createDataFrame([(i, f"n{i}") for i in range(10)], "k long, name string")
    projected = base.select("k", (F.col("k") * 2).alias("twice"), F.monotonically_increasing_id().alias("seq"))
    return {
        "projected and filtered": projected.filter("k > 3"),
        "observed": projected.observe("rows", F.count(F.lit(1)).alias("n")),
        "aliased": projected.alias("t").select("t.k"),
        "local rows": rows.filter("k > 1"),
        "aggregated": projected.groupBy("k").count(),
        "repartitioned": projected.repartition(3),
        "sorted": projected.orderBy("k"),
        "distinct": projected.select("k").distinct(),
        "joined": projected.join(rows, "k"),
        "in a subquery": projected.filter(F.col("k").isin(rows.select("k"))),
        "windowed": projected.select("k", F.row_number().over(
            __import__("pyspark.sql.window", fromlist=["Window"]).Window.orderBy("k")).alias("r")),
        "union": projected.union(projected),
    }


def test_the_shuffle_answer_matches_the_physical_plan_for_every_kind_of_frame(spark):
    for name, df in _frames(spark).items():
        planned = "Exchange" in df._jdf.queryExecution().executedPlan().toString()
        assert _reads_a_shuffle(df) == planned, name


def test_only_plans_of_operators_that_never_shuffle_skip_planning(spark):
    """The shortcut answers "no shuffle" alone; every frame with one is planned."""
    frames = _frames(spark)
    for name in ("projected and filtered", "observed", "aliased"):
        assert _without_shuffle(frames[name]._jdf.queryExecution().analyzed().toString()), name
    for name in ("aggregated", "repartitioned", "sorted", "distinct", "joined", "in a subquery", "windowed"):
        assert not _without_shuffle(frames[name]._jdf.queryExecution().analyzed().toString()), name


def test_a_subquery_in_a_filter_is_never_taken_for_a_plain_filter():
    tree = ("Filter id#0L IN (list#17 [])\n:  +- Project [id#18L]\n:     +- Relation [id#18L] JDBCRelation(t)\n"
            "+- Relation [id#0L] JDBCRelation(t)")
    assert not _without_shuffle(tree)
    assert _without_shuffle("Project [list#3L]\n+- Relation [list#3L] JDBCRelation(t)")


def _each_batch_frame_answer(spark, tmp_path, shape) -> list[bool]:
    """``_reads_a_shuffle`` of each batch's frame as foreachBatch hands it over, the stream
    shaped by ``shape`` upstream of it (where the batch frame's plan cannot see)."""
    import os

    source = tmp_path / "in"
    os.makedirs(source)
    spark.range(20).write.parquet(str(source / "a"))
    answers: list[bool] = []
    query = (shape(spark.readStream.schema("id long").parquet(str(source / "a"))).writeStream
             .trigger(availableNow=True).option("checkpointLocation", str(tmp_path / "ck"))
             .foreachBatch(lambda batch_df, _: answers.append(_reads_a_shuffle(batch_df.select("id"))))
             .start())
    query.awaitTermination()
    assert answers, "no batch ran"
    return answers


def test_a_shuffle_upstream_of_a_micro_batch_is_seen_through_its_rdd(spark, tmp_path):
    assert all(_each_batch_frame_answer(spark, tmp_path, lambda df: df.repartition(3)))


def test_a_micro_batch_read_without_a_shuffle_may_still_take_myisam(spark, tmp_path):
    assert not any(_each_batch_frame_answer(spark, tmp_path, lambda df: df.filter("id > 3")))
