"""The streaming baseline: files landing in a directory -> parquet, written by hand.

    python bench/handwritten_files_stream.py IN_DIR OUT_DIR CHECKPOINT_DIR INTERVAL_MS

What a user writes without SeaTide: a Structured Streaming file source over IN_DIR (the
schema taken from the files already there), Spark's exactly-once parquet file sink with a
``checkpointLocation``, a processing-time trigger every INTERVAL_MS. Same session settings
as SeaTide's drivers. Runs until SIGINT or SIGTERM, then stops the query between batches.
"""

import os
import signal
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from handwritten_session import handwritten_session  # noqa: E402

source, out, checkpoint, interval_ms = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
stopping = []
for signum in (signal.SIGINT, signal.SIGTERM):
    signal.signal(signum, lambda *_: stopping.append(True))
spark = handwritten_session("handwritten-stream")
schema = spark.read.parquet(source).schema
query = (spark.readStream.schema(schema).parquet(source)
         .writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
         .trigger(processingTime=f"{interval_ms} milliseconds").start())
while query.isActive and not stopping:
    query.awaitTermination(0.2)
query.stop()
spark.stop()
