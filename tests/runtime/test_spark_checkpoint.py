"""Each attempt runs Spark in a checkpoint directory of its own (runtime/spark_checkpoint.py).

A replaced driver that lives on for a moment (a frozen host thawed) still writes its Spark
checkpoint. Before, every attempt of a pipeline shared ``<pipeline>/spark``, and a commit the
zombie recorded there before its replacement stopped the replacement's query: "Concurrent
update to the commit log. Multiple streaming jobs detected for 2" (the Spark test below, with
both attempts in the shared directory). Now the zombie writes in its own directory.
"""

from __future__ import annotations

import os
import time

import pytest

from seatide.runtime.spark_checkpoint import claim, copy_pipeline_directory, restore_point
from seatide.store.db import AttemptFenced
from seatide.store.runs import spark_checkpoint_dir


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def _read(path: str) -> str:
    with open(path) as handle:
        return handle.read()


def test_an_attempt_claims_a_linked_copy_and_a_zombie_never_reaches_it(tmp_path):
    pipeline = str(tmp_path / "1")
    _write(os.path.join(pipeline, "spark", "offsets", "0"), "v1\nplanned by an older layout")
    _write(os.path.join(pipeline, "seatide.json"), "{}")

    first = claim(pipeline, 7)
    assert _read(os.path.join(first, "offsets", "0")).endswith("older layout")
    assert os.path.islink(os.path.join(pipeline, "spark")) and spark_checkpoint_dir(pipeline) == first

    second = claim(pipeline, 9)                 # the replacement
    assert spark_checkpoint_dir(pipeline) == second and not os.path.exists(first)
    assert os.path.realpath(os.path.join(pipeline, "spark")) == second
    _write(os.path.join(first, "commits", "0"), "the zombie's late commit")     # into its own directory
    assert not os.path.exists(os.path.join(second, "commits", "0"))
    assert spark_checkpoint_dir(pipeline) == second
    with pytest.raises(AttemptFenced):         # a zombie that starts late finds a newer attempt
        claim(pipeline, 8)

    _write(os.path.join(second, "commits", "0"), "v1\ncommitted")
    inode = os.stat(os.path.join(second, "commits", "0")).st_ino
    third = claim(pipeline, 12)                 # hard links: no data copied
    assert os.stat(os.path.join(third, "commits", "0")).st_ino == inode


def test_a_savepoints_copy_holds_the_current_checkpoint_as_a_plain_spark_directory(tmp_path):
    pipeline, saved = str(tmp_path / "1"), str(tmp_path / "savepoints" / "3" / "1")
    _write(os.path.join(pipeline, "seatide.json"), "{}")
    claim(pipeline, 4)
    current = claim(pipeline, 5)
    _write(os.path.join(current, "commits", "2"), "v1\n")
    copy_pipeline_directory(pipeline, saved)
    assert sorted(os.listdir(saved)) == ["seatide.json", "spark"]
    assert not os.path.islink(os.path.join(saved, "spark"))
    assert os.listdir(os.path.join(saved, "spark", "commits")) == ["2"]
    assert spark_checkpoint_dir(saved) == os.path.join(saved, "spark")


def _run_until(query, batch: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and query.isActive:
        progress = query.lastProgress
        if progress is not None and progress["batchId"] >= batch:
            return
        time.sleep(0.1)
    raise AssertionError(f"the query stopped or stalled before batch {batch}: {query.exception()}")


def test_a_zombies_commit_does_not_stop_its_replacements_query(spark, tmp_path):
    pipeline = str(tmp_path / "1")
    stream = spark.readStream.format("rate").option("rowsPerSecond", 20).load()

    zombie = claim(pipeline, 1)
    query = stream.writeStream.foreachBatch(lambda df, batch: None).option("checkpointLocation", zombie) \
        .trigger(processingTime="200 milliseconds").start()
    _run_until(query, 1)
    query.stop()
    committed = max(int(n) for n in os.listdir(os.path.join(zombie, "commits")) if n.isdigit())

    replacement = claim(pipeline, 2)

    def batch_meeting_the_zombie(df, batch: int) -> None:
        # The zombie thaws and records this batch's commit first, in the checkpoint it writes.
        _write(os.path.join(zombie, "commits", str(batch)), 'v1\n{"nextBatchWatermarkMs":0}')

    query = stream.writeStream.foreachBatch(batch_meeting_the_zombie).option("checkpointLocation", replacement) \
        .trigger(processingTime="200 milliseconds").start()
    try:
        _run_until(query, committed + 3)
        assert query.exception() is None
    finally:
        query.stop()



def test_the_restore_point_is_the_stores_batch_only_where_spark_planned_it(tmp_path):
    """The store records batch K before Spark's commits/K: a checkpoint with offsets/K and no
    commits/K starts after K when the store recorded K. A recorded batch Spark never planned
    (a resume whose directory move was never made, review of 3357121) is another directory's."""
    spark = str(tmp_path / "spark")
    assert restore_point(spark, None) is None and restore_point(spark, 4) is None     # nothing there
    _write(os.path.join(spark, "offsets", "0"), "v1\n{}\n")
    assert restore_point(spark, None) is None        # batch 0 planned, not recorded: a fresh start
    assert restore_point(spark, 0) == 0              # recorded, Spark's commit not yet written
    for batch in range(4):
        _write(os.path.join(spark, "offsets", str(batch)), "v1\n{}\n")
        _write(os.path.join(spark, "commits", str(batch)), "v1\n{}\n")
    assert restore_point(spark, None) == 3 and restore_point(spark, 2) == 3
    assert restore_point(spark, 20) == 3             # never planned here
    _write(os.path.join(spark, "offsets", "4"), "v1\n{}\n")
    assert restore_point(spark, 4) == 4
