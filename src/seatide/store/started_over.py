"""What a resume's answer says of each pipeline it starts over (store/restore.py).

``jobs.restore`` and the RESTORE_FALLBACK_FRESH event name them; the answer (the CLI's lines, the
REST answer's ``warnings``) must too: a user who asked for ``--fallback fresh`` (or whose job says
``restore.fallback = fresh``) reads there which pipelines lost their checkpoints, and why, before
their sinks receive rows again.
"""

from __future__ import annotations


def started_over(pipelines) -> list[str]:
    """One line per pipeline (``store.restore.PipelinePlan``) that starts over by this resume's
    fallback. One that starts over as decided before already has its line among the carried ones."""
    return [f"pipeline {p.pipeline_id}: starts over, its checkpoint not restored: {p.problem}"
            for p in pipelines if p.problem and not p.finished and not p.decided_fresh]


__all__ = ["started_over"]
