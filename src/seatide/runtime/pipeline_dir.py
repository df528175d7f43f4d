"""A pipeline's checkpoint directory, claimed by one attempt before anything of it runs: made with
a new lineage, or checked to belong to the pipeline (never another's offsets, never a silent start
over), and Spark's part of it claimed for this attempt (runtime/spark_checkpoint.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from seatide.plugin.base import PermanentError
from seatide.runtime import spark_checkpoint
from seatide.runtime.commit_log import read_json, write_json_atomic
from seatide.runtime.lost_directory import refuse_lost_lineage
from seatide.store.batch_mode import MODE_KEY
from seatide.store.runs import began_anew, new_lineage


@dataclass(frozen=True)
class ClaimedDir:
    lineage: str
    # The branch a restore came from keeps its origin: a restore from a savepoint is not a fresh
    # start, so the sinks' save modes (DROP_DATA...) are not made again.
    origin: str
    spark_dir: str      # this attempt's own Spark checkpoint


def claim_pipeline_dir(reporter, pipeline, env, job_id: str, checkpoint_dir: str) -> ClaimedDir:
    """Create the checkpoint directory, or check that the one there belongs to ``pipeline``."""
    meta_path = os.path.join(checkpoint_dir, "seatide.json")
    # before anything is written: a directory older than the sinks' decisions is refused
    refuse_lost_lineage(reporter, pipeline.pipeline_id, checkpoint_dir, env.micro_batch)
    meta = read_json(meta_path)
    if meta is None:
        os.makedirs(checkpoint_dir, exist_ok=True)
        meta = {"lineage": new_lineage(), "fingerprint": pipeline.fingerprint(), "job_id": job_id,
                "pipeline_id": pipeline.pipeline_id, MODE_KEY: env.micro_batch,
                **began_anew(checkpoint_dir)}         # kept by a savepoint's copy, as its origin
        write_json_atomic(meta_path, meta)
    elif not pipeline.fits(meta.get("fingerprint")):
        # Never restore offsets of other sources, and never start over silently.
        raise PermanentError(
            f"pipeline {pipeline.pipeline_id}: the checkpoint in {checkpoint_dir} was written for different "
            "sources; resume with the original config, or start over with --fallback fresh")
    elif meta.get("fingerprint") != pipeline.fingerprint() or meta.get(MODE_KEY) != env.micro_batch:
        # written before table lists were left out of it, or with no mode (store/batch_mode.py: the
        # check passed, so the batches from here on are this mode's): kept in today's form
        meta = {**meta, "fingerprint": pipeline.fingerprint(), MODE_KEY: env.micro_batch}
        write_json_atomic(meta_path, meta)
    spark_dir = spark_checkpoint.claim(checkpoint_dir, reporter.attempt_id)
    restored = spark_checkpoint.restore_point(spark_dir, reporter.recorded_batch(pipeline.pipeline_id))
    if restored is not None:
        reporter.pipeline_restored(pipeline.pipeline_id, restored)
    return ClaimedDir(meta["lineage"], meta.get("origin", meta["lineage"]), spark_dir)


__all__ = ["ClaimedDir", "claim_pipeline_dir"]
