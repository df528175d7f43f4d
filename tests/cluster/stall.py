"""A SQL function that passes each row through a failpoint inside the Spark task.

A plain BATCH FakeSource makes its rows in the JVM (``spark.range``), so no SeaTide code
runs in its tasks; a job that selects ``stall(seq)`` gets one in the executor's Python
worker. ``test.task_row=hang`` deadlocks the task, ``sleep:S`` makes it slow.
"""

from __future__ import annotations

from seatide import failpoints


def stall(value: int) -> int:
    failpoints.hit("test.task_row")
    return value
