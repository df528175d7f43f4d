"""Run in a process of its own by test_jdbc_task_rerun.py: one batch of a keyless Jdbc sink on a
Spark session whose scheduler retries a failed task (``local[2,3]``: three tries), which the
shared ``local[2]`` session of the tests never does.

    python -m tests.connectors.jdbc_task_rerun URL USER TABLE LOG_DIR
"""

from __future__ import annotations

import json
import sys

from seatide.plugin.sink_protocol import open_sink
from seatide.runtime.session import build_session
from tests.connectors.jdbc_sink_helpers import context, make_sink, write

ROWS = 100


def main(url: str, user: str, table: str, log_dir: str) -> None:
    spark = build_session("jdbc-task-rerun", {"spark.master": "local[2,3]", "spark.ui.enabled": "false"})
    df = spark.createDataFrame([(i, f"n{i}") for i in range(ROWS)], "id bigint, name string").repartition(2, "id")
    writer = open_sink(make_sink((url, user), table=table), context(spark, table))
    result = write(writer, log_dir, df, 0)
    print(json.dumps({"rows": result.state["rows"]}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
