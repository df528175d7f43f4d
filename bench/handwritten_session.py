"""The session the hand-written baselines build: SeaTide's drivers' settings (UI off, C1 JIT,
serial GC, local[*]), so a comparison measures SeaTide's overhead, not different tuning."""

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def handwritten_session(app_name: str):
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.appName(app_name).master("local[*]")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark
