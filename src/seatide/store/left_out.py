"""Pipelines a resume's config leaves out, and those it brings back (store/restore.py).

Leaving a pipeline out is the analogue of Flink's ``--allowNonRestoredState``: the state of a removed part is
dropped only when the user says so explicitly. A plain resume whose config leaves out a pipeline of the job is
refused, naming it, with the ways on: put it back in the config, or leave it out on purpose with ``--fallback
fresh``. Either way no other pipeline starts over for its absence (outside review of b5aba34..HEAD, R4: its
problem was put on the first pipeline, which the fallback then started from nothing, writing its rows again).
Left out, it is not run and its checkpoint directory stays as it was.

A pipeline brought back has no checkpoint the resume restores in place (``restore._added``); a savepoint that
holds it restores it with no row written twice only when no pipeline committed a batch after that savepoint:
``--from N`` rewinds every pipeline to N, and the batches committed since are planned again under a new lineage
(outside review of b5aba34..HEAD, R1). Only such a savepoint is named as that way on.
"""

from __future__ import annotations

from sqlalchemy import and_, select

from seatide.store import schema as s
from seatide.store.named_savepoint import savepoints_holding


def left_out_refusal(job_id: str, gone: list[int], command: str) -> str:
    """What a plain resume (no ``--fallback fresh``) whose config leaves out ``gone`` says of them."""
    them = f"pipeline{'s' if len(gone) > 1 else ''} {', '.join(map(str, gone))}"
    one = len(gone) == 1
    return (f"this config leaves out {them} of the job (pipelines {gone} of the job are missing), which "
            f"{'has' if one else 'have'} a checkpoint to go on from: left out, {'it is' if one else 'they are'} not "
            f"run. The ways on: put {'it' if one else 'them'} back in the config (the same sources, in the same "
            f"order) and resume; or leave {'it' if one else 'them'} out on purpose with `{command} --fallback fresh`: "
            f"{'its' if one else 'their'} checkpoint{'' if one else 's'} stay{'s' if one else ''} in place, and no "
            "other pipeline starts over for it")


def left_out_note(pipeline_id: int, checkpoint_dir: str) -> str:
    """What the accepted resume (``--fallback fresh``) says of a pipeline its config leaves out."""
    return (f"pipeline {pipeline_id}: left out by this config (--fallback fresh): not run, its checkpoint kept in place "
            f"({checkpoint_dir}); the other pipelines resume as they would without it")


def name_savepoints_holding(store, job, first: int, brought_back: list, plan) -> None:
    """Append to each brought-back pipeline's (``PipelinePlan``) problem the savepoints of the run that restore it
    with no row written twice: those that hold it, that a resume accepts, and after which no batch was committed."""
    if not brought_back:
        return
    with store.read() as conn:
        c = s.checkpoints.c
        newest = conn.execute(select(c.checkpoint_id).where(and_(
            c.job_id == job.job_id, c.kind == "CHECKPOINT", c.status == "COMPLETED", c.incarnation >= first))
            .order_by(c.checkpoint_id.desc()).limit(1)).scalar()
        for p in brought_back:
            ids = [i for i in savepoints_holding(conn, job, first, p.pipeline_id, plan) if newest is None or i > newest]
            if ids:
                p.problem += (f"; savepoint{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))} of the run "
                              f"hold{'' if len(ids) > 1 else 's'} it, and no batch was committed since: resume from "
                              f"one (`seatide resume {job.job_id} --from {ids[-1]}`), which restores it from its copy "
                              "and writes no row twice")


__all__ = ["left_out_note", "left_out_refusal", "name_savepoints_holding"]
