"""Pipelines a resume's config leaves out, and those it brings back (store/restore.py).

Leaving a pipeline out is the analogue of Flink's ``--allowNonRestoredState``: the state of a removed part is
dropped only when the user says so explicitly. A plain resume whose config leaves out a pipeline of the job is
refused, naming it, with the ways on: put it back in the config, or leave it out on purpose with ``--fallback
fresh``. Either way no other pipeline starts over for its absence (outside review of b5aba34..HEAD, R4: its
problem was put on the first pipeline, which the fallback then started from nothing, writing its rows again).
Left out, it is not run and its checkpoint directory stays as it was.

A pipeline brought back has no checkpoint the resume restores in place (``restore._added``): its refusal names
leaving it out again as the way on, and no savepoint. ``--from N`` rewinds every pipeline to N, and a batch a sink
committed after N is written again; a sink commits a batch before its checkpoint row (``store/decided_batches.py``),
so no checkpoint row tells that none was (outside review of a7e109b..db1751c, F3): suggest less, never a wrong way.

``--fallback fresh`` leaves the pipelines out and starts over every pipeline with a problem: it is named as the way
to leave them out only when there is no such problem (review F1: a brought-back one it would start over writes its
rows again; F2: pipelines are matched by position, so a config that leaves out an earlier one shows the next one's
sources as changed, and its start over writes the left-out one's rows into the same sink again).
"""

from __future__ import annotations


def left_out_refusal(job_id: str, gone: list[int], command: str, problems: list = (), finished: bool = False) -> str:
    """What a plain resume (no ``--fallback fresh``) whose config leaves out ``gone`` says of them; ``problems``:
    the config's pipelines (``PipelinePlan``) the fallback would start over; ``finished``: every pipeline of the
    config FINISHED, so leaving them out would run nothing."""
    them = f"pipeline{'s' if len(gone) > 1 else ''} {', '.join(map(str, gone))}"
    one = len(gone) == 1
    said = (f"this config leaves out {them} of the job (pipelines {gone} of the job are missing), which "
            f"{'has' if one else 'have'} a checkpoint to go on from: left out, {'it is' if one else 'they are'} not "
            f"run. The way on: put {'it' if one else 'them'} back in the config (the same sources, in the same "
            "order) and resume")
    if finished:
        return said + ("; left out, nothing would run: every pipeline this config has is FINISHED")
    if problems:
        shifted = any(getattr(p, "sources_changed", False) for p in problems)
        return said + (f"; leaving {'it' if one else 'them'} out on purpose is not offered while a pipeline above "
                       "has a problem: `--fallback fresh` would start that one over too" + (
                           ". Pipelines are matched by position (in the order of their first source): a config that "
                           "leaves out an earlier pipeline gives the ones after it its number, and their sources "
                           "then look changed; this config probably leaves out an earlier pipeline, not the last, "
                           "and starting that one over would write again the rows the left-out one committed"
                           if shifted else ""))
    return said + (f"; or leave {'it' if one else 'them'} out on purpose with `{command} --fallback fresh`: "
                   f"{'its' if one else 'their'} checkpoint{'' if one else 's'} stay{'s' if one else ''} in place, "
                   "and no other pipeline starts over for it")


def left_out_note(pipeline_id: int, checkpoint_dir: str) -> str:
    """What the accepted resume (``--fallback fresh``) says of a pipeline its config leaves out."""
    return (f"pipeline {pipeline_id}: left out by this config (--fallback fresh): not run, its checkpoint kept in place "
            f"({checkpoint_dir}); the other pipelines resume as they would without it")


__all__ = ["left_out_note", "left_out_refusal"]
