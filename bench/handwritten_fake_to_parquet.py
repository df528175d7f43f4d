"""The baseline: the same job written by hand in PySpark (10M rows of id, name, value -> parquet).

    python bench/handwritten_fake_to_parquet.py OUT_DIR [ROWS]

Same session settings as SeaTide's drivers (UI off, C1 JIT, serial GC, local[*]) and the
same kind of deterministic hash-based values, so the comparison measures SeaTide's
overhead, not different data or tuning.
"""

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession  # noqa: E402

out = sys.argv[1]
rows = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000_000
spark = (SparkSession.builder.appName("handwritten").master("local[*]")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
(spark.range(0, rows, 1, numPartitions=spark.sparkContext.defaultParallelism)
 .selectExpr("id",
             "substr(hex(xxhash64(id, 7) | -9223372036854775808L), 2, 5) AS name",
             "(xxhash64(id, 11) & 9007199254740991L) / 9007199254740992.0D * 1.0E6 AS value")
 .write.mode("overwrite").parquet(out))
spark.stop()
