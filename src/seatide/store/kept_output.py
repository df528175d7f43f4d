"""A destructive save mode must not empty a target that holds rows no pipeline will write again.

A target's save modes are decided once per job run and target, by whichever sink prepares it first
(``plugin/save_mode_door.py``, ``SaveModeDoor``). A fresh start (``--fallback fresh``) starts only
the pipelines that had not finished (``store/restore.py``), and their targets' decisions are made
anew then, under the fresh start's own names (``runtime/sink_runs.py``), as a new submission's.
Where another pipeline of the job writes the same target and is not started over (it
FINISHED, or carries on from its checkpoint), DROP_DATA or RECREATE_SCHEMA would empty the rows it
committed there, which it never writes again (outside review of c33655f, F2: FINISHED with 900 of
1800 rows). SeaTunnel runs a sink's save mode once, when the job starts, before any row is written;
a fresh start of one pipeline is no such start. So the decision is refused at the door, before
anything is destroyed, as a permanent failure naming the target and the pipeline that keeps its
rows, with the ways on: submit the job again as a new job (a new run: every pipeline writes again
after the target is emptied once), or a save mode that keeps data.

Rows count when a decided batch (a file sink's decision in the store), a commit mark in a
pipeline's current directory (every sink's, ``runtime/commit_log.py``), or the note a sink that
commits in its target's own system writes there before that commit (``applying``), names the target or one of
its earlier spellings (``Target.earlier_keys``): decided batches of a pipeline started over in this
incarnation from this incarnation on (the new lineage's own); of any other pipeline from the
incarnation whose preparation started its current lineage from nothing (its directory's mark: a
fresh start cancelled before its door and resumed plainly may still empty its old lineage, outside
review 4, F2), else since the run began. A mark naming no target (an earlier SeaTide's flat or
``tables`` state) counts for every target, as in ``store/dropped_output.py`` (F1): refusing wrongly
costs a save mode, accepting wrongly loses rows. The store cannot know a pipeline's targets before
its driver opens its sinks, so the door asks, not the resume.

In a job's first run the cause is sinks that give one target different save modes (one that keeps
data committed first: nothing orders it after the DROP_DATA); a new submission races the same way,
so the refusal names the same save modes on every sink of the target as the way on.
``plan/shared_targets.py`` refuses such a config when it is planned wherever the target is spelled
the same then (F3).

Where this refuses a pipeline started over that never began a batch before, it follows the run's
standing decision instead (``store/own_output.py``); a decision carried out late asks it too
(``store/owed_destroy.py``): both review 8.
"""

from __future__ import annotations

import glob
import json
import os

from sqlalchemy import and_, select

from seatide.store import schema as s
from seatide.store.checkpoint_metadata import checkpoint_metadata
from seatide.store.dropped_output import marked_targets
from seatide.store.restore import run_first_incarnation
from seatide.store.runs import read_prepared
from seatide.store.target_identity import any_overlap


# Rows count where their target overlaps one of the names, not only where it equals one: DROP_DATA
# on ``out`` empties ``out/b`` too; a query into an unknown table may have written any table of its
# database (outside review 7).
def kept_output(conn, job_id: str, pipeline_id: int, target: str, earlier_keys=()) -> str | None:
    """Why ``pipeline_id`` may not prepare ``target`` (``earlier_keys``: its older spellings, which
    older marks and decisions name) with a save mode that destroys, or None."""
    names = {target, *earlier_keys}
    job = conn.execute(select(s.jobs).where(s.jobs.c.job_id == job_id)).first()
    if job is None:
        return None
    first = run_first_incarnation(conn, job)
    prepare = json.loads(job.restore or "{}").get("prepare", {})
    started_over = {int(key) for key, source in prepare.items() if source is None}
    rows = conn.execute(select(s.pipelines).where(and_(
        s.pipelines.c.job_id == job_id, s.pipelines.c.incarnation == job.incarnation))
        .order_by(s.pipelines.c.pipeline_id)).all()
    for row in rows:
        since = job.incarnation if row.pipeline_id in started_over else _lineage_began(row.checkpoint_dir, first)
        marked = _marked(row.checkpoint_dir)
        if _decided_into(conn, job_id, row.pipeline_id, since, names) or "*" in marked or any_overlap(names, marked):
            return _refusal(target, pipeline_id, row, started_over, job.incarnation == first and not prepare)
    return None


def _lineage_began(directory: str | None, first: int) -> int:
    """The incarnation whose preparation started the directory's lineage from nothing (its mark: a
    fresh start's, cancelled or not, resumed in place since), else the run's first: decided batches
    of an older lineage it replaced are not rows it keeps. A savepoint's copy keeps the batches
    behind it, which older incarnations decided, so it counts from the run's first."""
    try:
        mark = read_prepared(directory) if directory else None
    except (OSError, ValueError):
        mark = None
    if mark is None or mark.get("from") is not None or not isinstance(mark.get("incarnation"), int):
        return first
    return max(first, mark["incarnation"])


def _decided_into(conn, job_id: str, pipeline_id: int, since: int, names: set[str]) -> bool:
    m = s.sink_manifests.c
    for text in conn.execute(select(m.manifest).where(and_(
            m.job_id == job_id, m.pipeline_id == pipeline_id, m.batch_id >= 0, m.incarnation >= since))).scalars():
        try:
            publish = json.loads(text).get("publish")
        except (ValueError, AttributeError):
            continue
        if isinstance(publish, dict) and isinstance(publish.get("targets"), dict) \
                and any_overlap(names, publish["targets"]):
            return True
    return False


def _marked(directory: str | None) -> set[str]:
    """The targets the commit marks of the directory's own lineage name (a started-over pipeline's
    directory holds its new lineage only once its driver prepared it: before any sink opens)."""
    if not directory:
        return set()
    try:
        meta = checkpoint_metadata(directory)
    except ValueError:
        meta = None
    lineage = None if meta is None else meta.get("lineage")
    return marked_targets(directory, lineage) | _applying(directory, lineage)


def _applying(directory: str, lineage: str | None) -> set[str]:
    """The targets a sink of the lineage is committing a batch into in their own system (Jdbc),
    named before that commit (``runtime/commit_log.py``, ``SinkCommitLog.applying``): between the
    commit and its mark the rows are there and no mark names them (outside review 8, G)."""
    found: set[str] = set()
    for path in glob.glob(os.path.join(glob.escape(directory), "sinks", "*", "applying", "*.json")):
        try:
            with open(path) as handle:
                mark = json.load(handle)
        except (OSError, ValueError):
            continue
        if isinstance(mark, dict) and (lineage is None or mark.get("seatide.lineage") in (None, lineage)):
            found.update(t for t in mark.get("targets", ()) if isinstance(t, str))
    return found


def _refusal(target: str, pipeline_id: int, row, started_over: set[int], first_run: bool) -> str:
    if row.pipeline_id == pipeline_id:
        who = (f"pipeline {pipeline_id} itself (another of its sinks, or its batches from before this resume) "
               "committed rows there that it does not write again")
    elif str(row.status).endswith("FINISHED"):
        who = f"pipeline {row.pipeline_id}, which FINISHED and is not run again, keeps the rows it committed there"
    elif row.pipeline_id in started_over:
        who = f"pipeline {row.pipeline_id}, started over too, has already committed rows of its own there"
    else:
        who = f"pipeline {row.pipeline_id}, which is not started over, keeps the rows it committed there"
    # A pipeline that keeps rows is not run again by a resume (FINISHED, or carrying on), so a resume
    # with a destructive mode is refused again: only a new job, or a mode that keeps data, works
    # (outside review 7: "resume it with that config" was refused again when followed).
    if first_run:
        fix = (f"if the job's sinks give this target different save modes, give every one of them the same "
               f"data_save_mode and schema_save_mode (applied once, by whichever sink prepares it first), and sinks "
               f"whose targets overlap without being one (a path inside another's) paths apart or save modes that "
               f"keep data, then submit it again (not a resume: it does not run pipeline {row.pipeline_id} again, "
               f"whose rows stay); or ")
    else:
        fix = ("submit the job again as a new job (every pipeline writes its rows again after the target is "
               "emptied once), or ")
    return (f"target {target} is shared: {who}. Its save mode (DROP_DATA, RECREATE_SCHEMA or CUSTOM_PROCESSING) "
            f"would destroy those rows, which nothing would write again; nothing was destroyed. Ways on: {fix}"
            f"resume it with a save mode that keeps data on this target (data_save_mode = APPEND_DATA, "
            f"schema_save_mode = CREATE_SCHEMA_WHEN_NOT_EXIST)")
