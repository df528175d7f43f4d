"""Spark's offset log, as a checkpoint holds it: what each micro-batch of a query reads.

``<spark dir>/offsets/<batch id>`` is written by Spark before the batch runs: a version line,
the batch's metadata, then one line per source with the offset the batch reads up to. A batch
starts where the one before it ended (its file is kept: ``minBatchesToRetain`` is at least one);
the first batch of a checkpoint starts at its source's initial offset. A replayed batch finds
the same two files, so whatever is derived from them is the same on every attempt.
"""

from __future__ import annotations

import json
import os

from seatide.plugin.base import BatchOffsets


def logged_offsets(spark_dir: str, batch_id: int) -> list[dict | None] | None:
    """Each source's end offset of batch ``batch_id`` (None where a source had none); None when
    the log has no such batch."""
    try:
        with open(os.path.join(spark_dir, "offsets", str(batch_id))) as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    return [json.loads(line) if line.strip() not in ("", "-") else None for line in lines[2:]]


def logs_a_batch(spark_dir: str) -> bool:
    """Whether the log holds a batch: a query started on it resumes, and asks its sources for
    no initial offset."""
    try:
        return any(name.isdigit() for name in os.listdir(os.path.join(spark_dir, "offsets")))
    except OSError:
        return False


def batch_offsets(spark_dir: str, batch_id: int, source: int = 0) -> BatchOffsets:
    """Where batch ``batch_id`` of the query's ``source``-th source starts and ends."""
    end = logged_offsets(spark_dir, batch_id)
    if end is None or end[source] is None:
        raise RuntimeError(f"Spark's offset log in {spark_dir} has no offset of batch {batch_id}")
    if batch_id == 0:
        return BatchOffsets(None, end[source])
    before = logged_offsets(spark_dir, batch_id - 1)
    if before is None:
        raise RuntimeError(f"Spark's offset log in {spark_dir} no longer has batch {batch_id - 1}, "
                           f"where batch {batch_id} starts")
    return BatchOffsets(before[source], end[source])


__all__ = ["batch_offsets", "logged_offsets", "logs_a_batch"]
