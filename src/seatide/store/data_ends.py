"""Which pipelines' data ended at a committed batch, read from the store's records alone.

A bounded pipeline's driver records each source's end (``source_ends``) only once every batch
of every sink is committed and published and the sinks' end-of-data checks passed
(``runtime/pipeline_run.py``, ``_finish``); the pipeline's FINISHED is written right after. A
driver that dies in between leaves a pipeline whose data is all committed and whose status says
otherwise: its next attempt ends it from these records, without Spark (``runtime/data_ends.py``).

Positive evidence only: every source of the pipeline has its end recorded in this incarnation,
and none of the pipeline's sink batches is decided but unpublished (in any incarnation: that
would be rolled forward at the pipeline's start, which needs its sinks opened). A sink's once
record (``decide_once``, batch -1: a save mode's, the multi-table Jdbc sink's home database) is no
batch: it stays DECIDED by design and is never rolled forward. A batch of an abandoned lineage
(before a fresh start) never is either, but the current lineage is in the pipeline's directory
(``seatide.json``), not in the store: such a batch still counts, and the pipeline runs on Spark.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from sqlalchemy import and_, select
from sqlalchemy.engine import Connection

from seatide.store import schema as s
from seatide.store.states import PIPELINE_TERMINAL


def pipelines_whose_data_ended(conn: Connection, job_id: str, incarnation: int,
                               sources: Mapping[int, Iterable[str]]) -> set[int]:
    """Those of ``sources`` ({pipeline: its sources' plugin ids}) whose data ended (see the module)."""
    e = s.source_ends
    ended: dict[int, set[str]] = {}
    for pipeline_id, plugin_id in conn.execute(select(e.c.pipeline_id, e.c.plugin_id).where(
            and_(e.c.job_id == job_id, e.c.incarnation == incarnation))):
        ended.setdefault(pipeline_id, set()).add(plugin_id)
    return {p for p, ids in sources.items()
            if (wanted := set(ids)) and wanted <= ended.get(p, set()) and not _undecided(conn, job_id, p)}


def _undecided(conn: Connection, job_id: str, pipeline_id: int) -> bool:
    m = s.sink_manifests
    return conn.execute(select(m.c.transaction_id).where(and_(
        m.c.job_id == job_id, m.c.pipeline_id == pipeline_id, m.c.batch_id >= 0,     # -1: a once record's
        m.c.status == "DECIDED")).limit(1)).first() is not None


def may_have_ended(conn: Connection, job_id: str, incarnation: int) -> bool:
    """Each pipeline of the incarnation not yet ended has a source's end recorded: the cheap first
    test of a worker's hint (``runtime/data_ends.py``, ``ends_without_spark``), one query with no
    config parsed, false for nearly every attempt."""
    p, e = s.pipelines, s.source_ends
    left = set(conn.execute(select(p.c.pipeline_id).where(and_(
        p.c.job_id == job_id, p.c.incarnation == incarnation, p.c.status.not_in(sorted(PIPELINE_TERMINAL))))).scalars())
    if not left:
        return False
    ended = set(conn.execute(select(e.c.pipeline_id).where(and_(
        e.c.job_id == job_id, e.c.incarnation == incarnation))).scalars())
    return left <= ended


__all__ = ["may_have_ended", "pipelines_whose_data_ended"]
