"""How a pipeline's batches were made: a resume must not change it under batches its sinks committed.

A checkpointed pipeline (a STREAMING job, or BATCH with ``checkpoint.interval``) runs micro-batches
that Spark plans in its offsets log; a plain BATCH pipeline runs its input whole as batch 0. A sink
skips a batch decided under the directory's lineage, whatever rows it holds now. So a pipeline that
committed micro-batches 0..K and is resumed plain writes everything as batch 0, skipped as decided:
the rows after batch 0 are never written, and the job FINISHES (outside review 3, F1). Resumed the
other way, Spark plans a batch 0 of its own, skipped: rows lost or written twice. Only the job's
original mode (or a fresh start) can go on.

Each driver records its mode in ``seatide.json`` (``MODE_KEY``) once the directory passed the check
(``store/decided_batches.py``): the batches committed since were made so. A directory written
before the record (review 5, F1-F3): its Spark offsets log shows it ran checkpointed; so does a
batch above 0 in the store (a plain run has batch 0 only), and at a resume the env of the incarnation
that decided last (the jobs row until the resume writes its own) tells either way. Any of them
against the new mode is a refusal, also with nothing decided in the store when the directory holds
Spark's plan (a sink that commits in its own system may have committed it before any record).
"""

from __future__ import annotations

import os

from seatide.store.checkpoint_metadata import checkpoint_metadata
from seatide.store.runs import spark_checkpoint_dir

MODE_KEY = "micro_batch"

_CHECKPOINTED = "in micro-batches (a STREAMING job, or BATCH with checkpoint.interval)"
_PLAIN = "as one plain batch (BATCH without checkpoint.interval)"


def ran_in_micro_batches(meta: dict, planned: int | None) -> bool | None:
    """Whether the directory's batches were micro-batches; None when it cannot tell
    (``planned``: the newest batch in its Spark offsets log)."""
    recorded = meta.get(MODE_KEY)
    if isinstance(recorded, bool):
        return recorded
    return True if planned is not None else None


def mode_change(ran_micro: bool, batch: int, planned_only: bool = False) -> str:
    """Why a pipeline that committed up to ``batch`` in one mode cannot go on in the other
    (``planned_only``: the store knows of no commit, but Spark planned micro-batches up to ``batch``)."""
    if ran_micro:
        what = (f"Spark planned its batches up to {batch} (a sink that commits in its own system may have "
                "committed them)" if planned_only else f"its sinks committed batches up to {batch}")
        return (f"it ran {_CHECKPOINTED} and {what}; resumed without "
                "checkpoint.interval it would run as one plain batch, numbered 0 again, which its sinks skip as "
                "committed: the rows after the committed batches would never be written. Resume with the "
                "job's original env (its job.mode and checkpoint.interval)")
    return (f"it ran {_PLAIN} and its sinks committed batch {batch}; resumed with checkpoint.interval (or as "
            "STREAMING) Spark would plan micro-batches anew from batch 0, which its sinks skip as committed: "
            "rows would be lost or written twice. Resume with the job's original env (its job.mode, no "
            "checkpoint.interval)")


def savepoint_mode_change(directory: str, batch: int | None, micro_batch: bool) -> str | None:
    """Why a savepoint's copy in ``directory`` (``<root>/savepoints/<id>/<pipeline>``), holding batches up
    to ``batch``, cannot go on in the mode ``micro_batch`` says, or None. The copy adopts the sinks' marks
    of those batches under its new lineage (runtime/checkpoint_move.py), so the other mode's batch 0 is
    skipped as committed: the same loss as a mode change in place. A savepoint without batches holds
    no rows, and any mode starts it well."""
    if batch is None or batch < 0:
        return None
    try:
        meta = checkpoint_metadata(directory)
    except ValueError:
        return None         # inspect_checkpoint names an unreadable copy
    if meta is None:
        return None         # or a missing one
    try:    # a savepoint taken before the mode was recorded: its Spark offsets log tells
        names = os.listdir(os.path.join(spark_checkpoint_dir(directory), "offsets"))
    except OSError:
        names = []
    planned = [int(n) for n in names if n.isdigit()]
    ran_micro = ran_in_micro_batches(meta, max(planned) if planned else None)
    if ran_micro is None or ran_micro == micro_batch:
        return None
    return f"savepoint {os.path.basename(os.path.dirname(directory))} was taken while " + mode_change(ran_micro, batch)
