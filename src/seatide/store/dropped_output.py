"""A lineage whose committed rows a later fresh start's save modes destroyed cannot go on.

A target's save modes (DROP_DATA, RECREATE_SCHEMA, CUSTOM_PROCESSING) are decided once per job run
and target, in the store (``plugin/save_mode_door.py``, ``SaveModeDoor``: batch -1, a ``P_`` key,
``{"target", "destroy", "pipeline", "lineage"}``). A lineage that ran without one (APPEND_DATA, or
a target new to it) and was then started over (``--fallback fresh``) with a destructive mode has
its targets emptied by the fresh start's first preparation. Its directory, put back from a backup,
was accepted while the fresh start decided no batch (``store/decided_batches.py`` knew only
batches): resumed, its sinks count its targets as written and prepare nothing, and go on from its
offsets: the rows it had committed are gone for good. Refused instead, naming the fresh start and
the target; the only way on is to start over (``--fallback fresh``), which writes them again.

A decision counts when it destroyed something (a plan, not None), was made by a later incarnation
than any that ran the directory's lineage (its first, from the directory's mark, and the newest that
decided or began a batch of it), by any other writer than that lineage (another lineage of the
pipeline, or any lineage of another pipeline: the record names whichever pipeline prepared the
shared target first, outside review of c33655f, F1), and over a target the lineage committed into
(``lineage_targets``). Where the lineage's targets cannot be told (decisions and marks of an older
SeaTide name none, or it only began batches), every target counts: refusing wrongly costs a fresh
start, accepting wrongly loses rows. A decision an earlier SeaTide recorded names no writer: it
counts too when made after the lineage ran (F3), as no lineage it could have been ran since.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from sqlalchemy import and_, select

from seatide.store import schema as s
from seatide.store.target_identity import any_overlap

_MARK_LINEAGE = "seatide.lineage"     # runtime/commit_log.py's _LINEAGE (store sits below runtime)


@dataclass(frozen=True)
class Dropped:
    """A fresh start's destructive save-mode decision over a lineage's output."""
    incarnation: int        # the incarnation whose preparation carried it out
    lineage: str            # the lineage it started
    target: str             # the target's key, as its sink names it
    writer: str = ""        # who made it, for a refusal: the lineage, and its pipeline when another one's
    at: float | None = None     # when it was decided (the store's clock)


def dropped_after(conn, job_id: str, pipeline_id: int, lineage: str, after: int,
                  directory: str | None = None) -> Dropped | None:
    """The first destructive save-mode decision another writer than ``lineage`` of ``pipeline_id`` made
    in an incarnation above ``after`` (the newest that ran ``lineage``) over a target ``lineage``
    committed into (``directory``: its checkpoint directory, whose commit marks name them too), else None."""
    m = s.sink_manifests.c
    rows = conn.execute(select(m.incarnation, m.manifest, m.decided_at).where(and_(
        m.job_id == job_id, m.batch_id == -1, m.incarnation > after,
        m.transaction_id.like("P\\_%", escape="\\"))).order_by(m.incarnation, m.decided_at)).all()
    targets: set[str] | None = None
    for row in rows:
        record = _record(row.manifest)
        if record is None or record.get("destroy") is None:
            continue
        if (record.get("pipeline"), record.get("lineage")) == (pipeline_id, lineage):
            continue
        if targets is None:         # read once, and only when a destructive decision needs it
            targets = lineage_targets(conn, job_id, pipeline_id, lineage, directory) or {"*"}
        if "*" in targets or _destroyed_overlaps(record, targets):
            return Dropped(row.incarnation, str(record.get("lineage")), str(record.get("target")),
                           _writer(record, pipeline_id), row.decided_at)
    return None


def _destroyed_overlaps(record: dict, targets: set[str]) -> bool:
    """Whether the target a destructive record names (under its key or an earlier spelling of it)
    overlaps one the lineage committed into: an enclosing path emptied, a query sink's table, one
    table spelled two ways (``store/target_identity.overlaps``, as the kept-rows check asks;
    outside review 8, C: equality let a backup go on over rows an enclosing DROP_DATA removed)."""
    if record.get("target") is None:
        return False
    named = [str(record["target"]), *map(str, record.get("earlier") or ())]
    return any_overlap(named, targets)


def _writer(record: dict, pipeline_id: int) -> str:
    if record.get("pipeline") is None:
        return "whose record, from an earlier SeaTide, names no pipeline or lineage"
    if record["pipeline"] != pipeline_id:
        return f"lineage {record.get('lineage')} of pipeline {record['pipeline']}, which writes the same target"
    return f"lineage {record.get('lineage')}"


def _record(text: str) -> dict | None:
    try:
        record = json.loads(text)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def lineage_targets(conn, job_id: str, pipeline_id: int, lineage: str, directory: str | None) -> set[str]:
    """The targets (their keys, as the save-mode records name them) ``lineage`` of ``pipeline_id`` committed
    into: its decisions in the store (a file sink's), and its sinks' newest commit marks in ``directory``
    (every sink's: a sink that commits in its own system marks its batches there too); empty when none
    names one."""
    m = s.sink_manifests.c
    found: set[str] = set()
    for text in conn.execute(select(m.manifest).where(and_(
            m.job_id == job_id, m.pipeline_id == pipeline_id, m.batch_id >= 0,
            m.transaction_id.like(f"T\\_%\\_{lineage}\\_%", escape="\\")))).scalars():
        publish = (_record(text) or {}).get("publish")
        if isinstance(publish, dict) and isinstance(publish.get("targets"), dict):
            found.update(publish["targets"])
    return found | marked_targets(directory, lineage) if directory else found


def marked_targets(directory: str, lineage: str | None) -> set[str]:
    """The targets the newest commit mark of each sink in ``directory`` names (``runtime/commit_log.py``'s
    marks: ``{"seatide.lineage", "state"}``, or a bare state from before marks had a lineage): a batch's
    state carries every target written up to it. ``lineage`` None: the directory's own. ``"*"`` for a
    mark whose state names no target (an earlier SeaTide's flat or ``tables`` state): every one counts."""
    root = os.path.join(directory, "sinks")
    try:
        sinks = os.listdir(root)
    except OSError:
        return set()
    found: set[str] = set()
    for sink in sinks:
        try:
            names = os.listdir(os.path.join(root, sink, "commit"))
        except OSError:
            continue
        for batch in sorted((int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit()), reverse=True):
            try:
                with open(os.path.join(root, sink, "commit", f"{batch}.json")) as handle:
                    mark = json.load(handle)
            except (OSError, ValueError):
                continue
            if not isinstance(mark, dict) or (_MARK_LINEAGE in mark and lineage is not None
                                              and mark[_MARK_LINEAGE] != lineage):
                continue
            state = mark.get("state", {}) if _MARK_LINEAGE in mark else mark
            if isinstance(state, dict) and isinstance(state.get("targets"), dict):
                found.update(state["targets"])
            elif state:     # an earlier SeaTide's (flat or "tables"): it names none, so every one counts
                found.add("*")
            break
    return found


def dropped_output(directory: str, lineage: str, batch: int, dropped: Dropped) -> str:
    """Why the directory of ``lineage`` (committed up to ``batch``) cannot go on, for a refusal."""
    return (f"its checkpoint directory {directory} holds lineage {lineage}, whose sinks committed batches up to "
            f"{batch}, but the fresh start of incarnation {dropped.incarnation} ({dropped.writer}) then "
            f"prepared target {dropped.target} with a save mode that destroys (DROP_DATA, RECREATE_SCHEMA or "
            f"CUSTOM_PROCESSING) and emptied it: the directory is a backup from before that fresh start, and going "
            f"on from it would never write lineage {lineage}'s committed rows again (they are lost). Start the "
            f"pipeline over instead, which writes them again")
