"""A lineage whose committed rows a later fresh start's save modes destroyed cannot go on.

A target's save modes (DROP_DATA, RECREATE_SCHEMA, CUSTOM_PROCESSING) are decided once per job run
and target, in the store (``plugin/sink_protocol.py``, ``SaveModeDoor``: batch -1, a ``P_`` key,
``{"target", "destroy", "pipeline", "lineage"}``). A lineage that ran without one (APPEND_DATA, or
a target new to it) and was then started over (``--fallback fresh``) with a destructive mode has
its targets emptied by the fresh start's first preparation. Its directory, put back from a backup,
was accepted while the fresh start decided no batch (``store/decided_batches.py`` knew only
batches): resumed, its sinks count its targets as written and prepare nothing, and go on from its
offsets: the rows it had committed are gone for good. Refused instead, naming the fresh start and
the target; the only way on is to start over (``--fallback fresh``), which writes them again.

A decision counts when it destroyed something (a plan, not None), was made by another lineage of
the same pipeline, and by a later incarnation than any that ran the directory's lineage (its first,
from the directory's mark, and the newest that decided or began a batch of it). A decision an
earlier SeaTide recorded names no pipeline or lineage, and counts as before: not at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqlalchemy import and_, select

from seatide.store import schema as s


@dataclass(frozen=True)
class Dropped:
    """A fresh start's destructive save-mode decision over a lineage's output."""
    incarnation: int        # the incarnation whose preparation carried it out
    lineage: str            # the lineage it started
    target: str             # the target's key, as its sink names it


def dropped_after(conn, job_id: str, pipeline_id: int, lineage: str, after: int) -> Dropped | None:
    """The first destructive save-mode decision another lineage of ``pipeline_id`` made in an
    incarnation above ``after`` (the newest that ran ``lineage``), else None."""
    m = s.sink_manifests.c
    rows = conn.execute(select(m.incarnation, m.manifest).where(and_(
        m.job_id == job_id, m.batch_id == -1, m.incarnation > after,
        m.transaction_id.like("P\\_%", escape="\\"))).order_by(m.incarnation, m.decided_at)).all()
    for row in rows:
        try:
            record = json.loads(row.manifest)
        except ValueError:
            continue
        if not isinstance(record, dict) or record.get("destroy") is None:
            continue
        if record.get("pipeline") == pipeline_id and record.get("lineage") not in (None, lineage):
            return Dropped(row.incarnation, str(record["lineage"]), str(record.get("target")))
    return None


def dropped_output(directory: str, lineage: str, batch: int, dropped: Dropped) -> str:
    """Why the directory of ``lineage`` (committed up to ``batch``) cannot go on, for a refusal."""
    return (f"its checkpoint directory {directory} holds lineage {lineage}, whose sinks committed batches up to "
            f"{batch}, but the fresh start of incarnation {dropped.incarnation} (lineage {dropped.lineage}) then "
            f"prepared target {dropped.target} with a save mode that destroys (DROP_DATA, RECREATE_SCHEMA or "
            f"CUSTOM_PROCESSING) and emptied it: the directory is a backup from before that fresh start, and going "
            f"on from it would never write lineage {lineage}'s committed rows again (they are lost). Start the "
            f"pipeline over instead, which writes them again")
