"""A resumed pipeline whose sources changed since the incarnation before (store/restore.py).

Unfinished, it cannot go on from a checkpoint written for other sources. FINISHED, it is no
finished pipeline of the new job definition either: it never read its new sources, and a
resume that kept it FINISHED would end the job without them (as Flink's restore would not: a
changed job graph is a new job). Both are a problem for the resume's fallback: a plain resume
refuses naming the pipeline, ``--fallback fresh`` starts it over and says so.
"""

from __future__ import annotations


def changed_sources(pipeline, fingerprint: str, finished: bool) -> str | None:
    """Why ``pipeline`` (``plan.dag.Pipeline``) cannot go on as it was, whose earlier incarnation's
    sources had ``fingerprint`` (and it ``finished`` there); None: its sources did not change."""
    if pipeline.fits(fingerprint):
        return None
    what = ("its sources changed since the checkpoint was taken (a source added, removed, reordered or "
            "reconfigured)")
    return f"it FINISHED before, but {what}: it never read its new sources" if finished else what


__all__ = ["changed_sources"]
