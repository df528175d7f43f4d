"""Whether a destructive save-mode decision found recorded and never carried out is still owed.

A Jdbc plan records the target's decision in the store right before its DELETE (or DROP, or the
custom SQL), and records in the target database, in the transaction that carries it out, that it
did (``connectors/jdbc/save_modes.py``). A driver that dies between the two leaves a decision that
says destroy and was never carried out; whoever prepares the target next in the decision's scope
carries it out before its rows (``plugin/save_mode_door.py``). Within the scope nothing was written
in between: every writer of the scope carries the decision out before its first row. A fresh start
makes its save modes under a scope of its own (``runtime/sink_runs.py``), so its pipelines may have
committed rows there since (outside review 8, B); a table's rows have no identity the plan could
name, so the late step would take them too:

* a destructive decision of another scope recorded later over the same target, and carried out
  (its own record in the target's system says so), emptied it after this one was decided: nothing
  of this one is owed, it is skipped (recorded as done), and the rows stay: the target was emptied
  once, as the user's save mode asks, before the rows now there. A later decision only recorded
  proves nothing (outside review of review 8's fixes, B1: one recorded and never carried out made
  the first skipped too, and the rows of before the run stayed under the job's), nor one over a
  target that merely overlaps (``overlaps`` says "may touch", not "emptied");
* otherwise, where rows a pipeline keeps are there (``store/kept_output.py``), it is refused,
  nothing destroyed: the decision stands in the store whatever the config says now, so the one
  way on is a new job.
"""

from __future__ import annotations

import json

from sqlalchemy import and_, select

from seatide.store import schema as s


def later_destroys(conn, job_id: str, key: str, names: list[str]) -> list[dict]:
    """The destructive save-mode decisions of the job's other scopes over the target ``names`` name
    (its key and earlier spellings), recorded after the decision ``key``: whether one was carried
    out, the target's system tells (each a ``destroy`` plan, which names its record there)."""
    m = s.sink_manifests.c
    decided_at = conn.execute(select(m.decided_at).where(and_(
        m.job_id == job_id, m.batch_id == -1, m.transaction_id == key))).scalar()
    if decided_at is None:
        return []
    scope = key.partition("@")[0]
    found = []
    for later, text in conn.execute(select(m.transaction_id, m.manifest).where(and_(
            m.job_id == job_id, m.batch_id == -1, m.transaction_id != key, m.decided_at > decided_at,
            m.transaction_id.like("P\\_%", escape="\\")))).all():
        try:
            record = json.loads(text)
        except ValueError:
            continue
        if later.partition("@")[0] != scope and isinstance(record, dict) and isinstance(record.get("destroy"), dict) \
                and {str(record.get("target")), *map(str, record.get("earlier") or ())} & set(names):
            found.append(record["destroy"])
    return found


def refusal(pipeline_id: int, target: str, kept: str) -> str:
    """``kept``: whose rows are there (``store/kept_output.py``'s reason)."""
    return (f"pipeline {pipeline_id}: target {target}: the job's decision of its save modes (DROP_DATA, "
            "RECREATE_SCHEMA or CUSTOM_PROCESSING) was recorded and never carried out (the driver that decided "
            f"it ended first), and rows were committed there since, which carrying it out now would destroy "
            f"({kept.partition(': ')[2].partition('. Its save mode')[0] or kept}); nothing was destroyed. "
            "The decision stands whatever the config says now. "
            "Way on: submit the job again as a new job (every pipeline writes its rows again after the target is "
            "emptied once)")


__all__ = ["later_destroys", "refusal"]
