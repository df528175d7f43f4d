"""The baseline: the same job written by hand in PySpark (id, name, value rows -> parquet).

    python bench/handwritten_fake_to_parquet.py OUT_DIR [ROWS]
    python bench/handwritten_fake_to_parquet.py OUT_DIR ROWS --checkpointed CHECKPOINT_DIR [--max-rows N]

Same session settings as SeaTide's drivers (UI off, C1 JIT, serial GC, local[*]) and the
same kind of deterministic hash-based values, so the comparison measures SeaTide's
overhead, not different data or tuning.

``--checkpointed`` is what a user writes by hand for a resumable bounded job: a Structured
Streaming query with ``Trigger.AvailableNow`` and a ``checkpointLocation``, bounded
micro-batches of at most ``--max-rows`` rows from a small Python streaming source of row
ranges, written by Spark's own exactly-once parquet file sink (``_spark_metadata`` log).
"""

import argparse
import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from handwritten_session import handwritten_session  # noqa: E402
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition  # noqa: E402
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadMaxRows,  # noqa: E402
                                              SupportsTriggerAvailableNow)

COLUMNS = ("id",
           "substr(hex(xxhash64(id, 7) | -9223372036854775808L), 2, 5) AS name",
           "(xxhash64(id, 11) & 9007199254740991L) / 9007199254740992.0D * 1.0E6 AS value")


class RowRanges(DataSource):
    """Row numbers 0..rows-1 as (start, stop) ranges, at most max_rows per micro-batch."""

    @classmethod
    def name(cls):
        return "row_ranges"

    def schema(self):
        return "start bigint, stop bigint"

    def streamReader(self, schema):
        return RowRangeReader(self.options)


class RowRangeReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options):
        self.rows, self.max_rows = int(options["rows"]), int(options["max_rows"])
        self.parts = int(options["parts"])

    def initialOffset(self):
        return {"row": 0}

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.max_rows)

    def prepareForTriggerAvailableNow(self):
        pass

    def latestOffset(self, start, limit):
        cap = self.rows if isinstance(limit, ReadAllAvailable) else start["row"] + limit.max_rows
        return {"row": min(self.rows, cap)}

    def partitions(self, start, end):
        a, b = start["row"], end["row"]
        bounds = [a + i * (b - a) // self.parts for i in range(self.parts + 1)]
        return [InputPartition((bounds[i], bounds[i + 1])) for i in range(self.parts)
                if bounds[i] < bounds[i + 1]]

    def read(self, partition):
        yield partition.value

    def commit(self, end):
        pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("rows", nargs="?", type=int, default=10_000_000)
    parser.add_argument("--checkpointed", metavar="CHECKPOINT_DIR")
    parser.add_argument("--max-rows", type=int, default=1_000_000, help="rows per micro-batch")
    args = parser.parse_args()
    spark = handwritten_session("handwritten")
    parts = spark.sparkContext.defaultParallelism
    if args.checkpointed is None:
        (spark.range(0, args.rows, 1, numPartitions=parts).selectExpr(*COLUMNS)
         .write.mode("overwrite").parquet(args.out))
    else:
        spark.dataSource.register(RowRanges)
        ranges = (spark.readStream.format("row_ranges")
                  .options(rows=str(args.rows), max_rows=str(args.max_rows), parts=str(parts)).load())
        query = (ranges.selectExpr("explode(sequence(start, stop - 1)) AS id").selectExpr(*COLUMNS)
                 .writeStream.format("parquet").option("path", args.out)
                 .option("checkpointLocation", args.checkpointed)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
