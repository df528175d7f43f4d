"""The baseline: FakeSource's job into Iceberg written by hand with PySpark and pyiceberg.

    python bench/handwritten_iceberg.py CATALOG_DB WAREHOUSE [ROWS]

Spark writes the rows (id, name, value) as parquet (zstd, Iceberg's default codec) under the
table's data directory; pyiceberg's ``add_files`` then commits them as one snapshot of a table
in a SQL catalog (SQLite). This is what a user writes without SeaTide, and what SeaTide does
per micro-batch, without its exactly-once bookkeeping.
"""

import os
import sys

from handwritten_fake_to_parquet import COLUMNS
from handwritten_session import handwritten_session


def main():
    catalog_db, warehouse = sys.argv[1], sys.argv[2]
    rows = int(sys.argv[3]) if len(sys.argv) > 3 else 10_000_000
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    spark = handwritten_session("handwritten-iceberg")
    catalog = SqlCatalog("default", uri=f"sqlite:///{catalog_db}", warehouse=f"file://{warehouse}")
    catalog.create_namespace("bench")
    table = catalog.create_table("bench.t", pa.schema([("id", pa.int64()), ("name", pa.large_string()),
                                                      ("value", pa.float64())]))
    out = os.path.join(warehouse, "bench", "t", "data", "batch-0")
    parts = spark.sparkContext.defaultParallelism
    (spark.range(0, rows, 1, numPartitions=parts).selectExpr(*COLUMNS)
     .write.mode("overwrite").option("compression", "zstd").parquet("file://" + out))
    files = ["file://" + os.path.join(out, f) for f in sorted(os.listdir(out)) if f.endswith(".parquet")]
    table.add_files(files)
    spark.stop()


if __name__ == "__main__":
    main()
