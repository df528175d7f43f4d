"""Retention: what the store and the data directory keep, and the leader's pruning step.

A STREAMING job with a 1 s checkpoint interval commits 2.6 million micro-batches a month;
without pruning its checkpoint rows alone grow the store by gigabytes. The rules (also in
docs/operations.md, "Retention"):

* **Checkpoint rows** (kind CHECKPOINT), per job incarnation and pipeline: those of the newest
  ``checkpoint.retained`` batches of the job (``DEFAULT_CHECKPOINTS_RETAINED`` for jobs submitted
  before the column existed), and always the newest COMPLETED one, the row a resume looks
  for. Savepoints are never pruned. Counts and counters never go down: they are the
  pipeline row's totals (``checkpoints_completed`` / ``checkpoints_failed``), which the driver
  keeps and pruning leaves alone.
* **Sink manifests** (a file sink's commit decision per batch, ``runtime/commit_log.py``), per
  job incarnation, pipeline and sink: PUBLISHED ones beyond the newest ``checkpoint.retained``
  batches. A DECIDED one is never pruned: the next attempt must still publish it. All of a
  job's go with its history (``forget_job``).
* **Events** of a job: the newest ``events_per_job`` and every event of the last
  ``events_days``, and every SOURCES_RELEASED (a release line, ``store/release_line.py``; one
  per release). Events of no job (leader elections, schema upgrades) after
  ``global_events_days``, except LEADER_ELECTED (the leader-change counter counts them; one
  per failover).
* **Set-aside checkpoint directories** (``<dir>.discarded-<ms>``, ``<dir>.replaced-<ms>``, left
  by a resume, see ``store/restore.py``) after ``set_aside_days``, by the time in their name.
  A resume's staging copy (``<dir>.restoring-<incarnation>-<attempt>``) left by a driver that died
  half-way and was never followed (the job was cancelled) after ``set_aside_days`` without a
  write: always safe, since a driver that prepares the checkpoint makes its staging copy anew.
* **Attempt logs** (``<data_dir>/logs/<job>/attempt-<id>.log``) of attempts that are no longer
  live, once unwritten for ``attempt_logs_days``.

Pruning runs in the leader every ``every_s`` (not every tick). It removes ``batch`` rows per
transaction and spends at most ``slice_s`` per kind per run; a backlog (a store upgraded after
a month) is worked off over the next ticks, never in one long transaction, and never keeps
the leader from renewing its lease: between any two steps it renews when due (``still_leading``,
the leader's ``renew_if_due``), and stops once it no longer leads. Every delete is fenced by the
leader's epoch. It decides from what it reads, like ``reconcile_job``: a new leader prunes
exactly what the old one would have.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
from dataclasses import dataclass
from typing import Callable

from sqlalchemy import and_, delete, func, select

from seatide.config.env import ENV_OPTIONS
from seatide.store import schema as s
from seatide.store.db import Store
from seatide.store.states import ATTEMPT_LIVE

log = logging.getLogger(__name__)

DAY_S = 86400.0
DEFAULT_CHECKPOINTS_RETAINED = next(o.default for o in ENV_OPTIONS if o.key == "checkpoint.retained")
SET_ASIDE = re.compile(r"\.(discarded|replaced)-(\d+)$")
RESTORING = re.compile(r"\.restoring-(\d+)(-\d+)?$")     # <incarnation>-<attempt>; older: <incarnation>
ATTEMPT_LOG = re.compile(r"^attempt-(\d+)\.log$")


@dataclass(frozen=True)
class RetentionRules:
    events_per_job: int = 1000
    events_days: float = 7.0
    global_events_days: float = 30.0
    set_aside_days: float = 7.0
    attempt_logs_days: float = 7.0
    every_s: float = 60.0          # how often the leader prunes
    batch: int = 1000              # rows (or files) removed per transaction
    # Each kind of pruning stops after this long in a run (the rest waits for the next tick): the
    # reconcile pass it is part of must stay short (the tick's latency).
    slice_s: float = 0.2


@dataclass
class Pruned:
    checkpoints: int = 0
    manifests: int = 0
    events: int = 0
    directories: int = 0
    logs: int = 0
    more: bool = False             # stopped at its time slice: run again at the next tick


class Slice:
    """The time one kind of pruning may take in a run; the first step is always allowed while
    the leader still leads (``still_leading`` renews its lease when due)."""

    def __init__(self, seconds: float, still_leading: Callable[[], bool] = lambda: True):
        self.deadline = time.monotonic() + seconds
        self.started = False
        self.still_leading = still_leading

    def go(self) -> bool:
        if not self.still_leading():
            return False
        first, self.started = not self.started, True
        return first or time.monotonic() < self.deadline


class Pruner:
    """The leader's periodic step; ``maybe_run`` is called every tick and is cheap between runs."""

    def __init__(self, store: Store, data_dir: str | None, rules: RetentionRules = RetentionRules()):
        self.store = store
        self.data_dir = data_dir
        self.rules = rules
        self.next_at = 0.0

    def maybe_run(self, epoch: int, now: float, still_leading: Callable[[], bool] = lambda: True) -> Pruned | None:
        if now < self.next_at:
            return None
        done = self.run(epoch, now, still_leading)
        self.next_at = now if done.more else now + self.rules.every_s
        return done

    def run(self, epoch: int, now: float, still_leading: Callable[[], bool] = lambda: True) -> Pruned:
        """still_leading: called between steps (the leader's ``renew_if_due``); once it says no,
        the run stops where it is (``more``) and the next leader carries on."""
        rules = self.rules
        done = Pruned()
        done.checkpoints, more_rows = prune_checkpoints(self.store, epoch, rules, Slice(rules.slice_s, still_leading))
        done.manifests, more_manifests = prune_manifests(self.store, epoch, rules, Slice(rules.slice_s, still_leading))
        done.events, more_events = prune_events(self.store, epoch, now, rules, Slice(rules.slice_s, still_leading))
        if self.data_dir is not None and still_leading():
            self._fence(epoch)        # files are removed only while this epoch leads
            done.directories = remove_paths(set_aside_directories(self.store, self.data_dir, now, rules)
                                            [:rules.batch])
            done.logs = remove_paths(ended_attempt_logs(self.store, self.data_dir, now, rules)[:rules.batch])
        done.more = more_rows or more_manifests or more_events or rules.batch in (done.directories, done.logs)
        if done.checkpoints or done.manifests or done.events or done.directories or done.logs:
            log.info("retention: pruned %s", done)
        return done

    def _fence(self, epoch: int) -> None:
        with self.store.leader_tx(epoch):
            pass


# -- checkpoint rows -----------------------------------------------------------------------
def prune_checkpoints(store: Store, epoch: int, rules: RetentionRules, budget: Slice) -> tuple[int, bool]:
    """Remove checkpoint rows beyond each pipeline's retention; (rows removed, stopped short)."""
    p, c = s.pipelines, s.checkpoints
    retained = func.coalesce(s.jobs.c.checkpoints_retained, DEFAULT_CHECKPOINTS_RETAINED)
    # Only pipelines holding more CHECKPOINT rows than they keep can have any beyond retention:
    # one index-only count (ix_checkpoints_pipeline) finds them, where asking every pipeline
    # would take three queries each (seconds of the leader's tick at a thousand jobs).
    held = (select(c.c.job_id, c.c.incarnation, c.c.pipeline_id, func.count().label("n"))
            .where(c.c.kind == "CHECKPOINT").group_by(c.c.job_id, c.c.incarnation, c.c.pipeline_id).subquery())
    with store.read() as conn:
        pipelines = conn.execute(select(p.c.job_id, p.c.incarnation, p.c.pipeline_id, retained.label("keep"))
                                 .join(s.jobs, s.jobs.c.job_id == p.c.job_id)
                                 .join(held, and_(held.c.job_id == p.c.job_id, held.c.incarnation == p.c.incarnation,
                                                  held.c.pipeline_id == p.c.pipeline_id))
                                 .where(held.c.n > retained)
                                 .order_by(p.c.job_id, p.c.incarnation, p.c.pipeline_id)).all()
    removed = 0
    for row in pipelines:
        while True:
            doomed = _beyond_retention(store, row, rules.batch)
            if not doomed:
                break
            if not budget.go():
                return removed, True
            removed += _remove_checkpoints(store, epoch, row, doomed)
            if len(doomed) < rules.batch:
                break
    return removed, False


def _pipeline_key(row):
    c = s.checkpoints
    return and_(c.c.job_id == row.job_id, c.c.incarnation == row.incarnation, c.c.pipeline_id == row.pipeline_id,
                c.c.kind == "CHECKPOINT")


def _beyond_retention(store: Store, row, limit: int) -> list[int]:
    """The oldest rows past the pipeline's newest ``keep`` batches, sparing its newest COMPLETED one
    (the row a resume looks for, even when newer ones failed).

    Ordered by batch id, so every query walks the (job, incarnation, pipeline, batch) index from
    one end: a few rows read whatever the backlog, on either store, even before the planner has
    statistics for the table."""
    c = s.checkpoints
    key = _pipeline_key(row)
    with store.read() as conn:
        nth = conn.execute(select(c.c.batch_id).where(key).order_by(c.c.batch_id.desc())
                           .offset(max(int(row.keep), 1) - 1).limit(1)).scalar()
        if nth is None:
            return []
        completed = conn.execute(select(c.c.checkpoint_id).where(and_(key, c.c.status == "COMPLETED"))
                                 .order_by(c.c.batch_id.desc()).limit(1)).scalar()
        older = and_(key, c.c.batch_id < nth)
        if completed is not None:
            older = and_(older, c.c.checkpoint_id != completed)
        return list(conn.execute(select(c.c.checkpoint_id).where(older).order_by(c.c.batch_id)
                                 .limit(limit)).scalars())


def _remove_checkpoints(store: Store, epoch: int, row, ids: list[int]) -> int:
    c = s.checkpoints
    # By primary key: the rows were chosen by pipeline already, and a planner given the pipeline
    # too may walk the pipeline's whole index (seconds, on a month-old backlog in SQLite).
    where = and_(c.c.job_id == row.job_id, c.c.incarnation == row.incarnation, c.c.checkpoint_id.in_(ids))
    with store.leader_tx(epoch) as conn:
        return conn.execute(delete(c).where(where)).rowcount


# -- sink manifests ------------------------------------------------------------------------
def prune_manifests(store: Store, epoch: int, rules: RetentionRules, budget: Slice) -> tuple[int, bool]:
    """Remove PUBLISHED manifests beyond each sink's retention; (rows removed, stopped short)."""
    m = s.sink_manifests
    retained = func.coalesce(s.jobs.c.checkpoints_retained, DEFAULT_CHECKPOINTS_RETAINED)
    with store.read() as conn:
        sinks = conn.execute(
            select(m.c.job_id, m.c.incarnation, m.c.pipeline_id, m.c.plugin_id, retained.label("keep"))
            .join(s.jobs, s.jobs.c.job_id == m.c.job_id).where(m.c.status == "PUBLISHED")
            .group_by(m.c.job_id, m.c.incarnation, m.c.pipeline_id, m.c.plugin_id, s.jobs.c.checkpoints_retained)
            .having(func.count() > retained).order_by(m.c.job_id, m.c.incarnation, m.c.pipeline_id)).all()
    removed = 0
    for row in sinks:
        key = and_(m.c.job_id == row.job_id, m.c.incarnation == row.incarnation, m.c.pipeline_id == row.pipeline_id,
                   m.c.plugin_id == row.plugin_id, m.c.status == "PUBLISHED")
        while True:
            with store.read() as conn:
                nth = conn.execute(select(m.c.batch_id).where(key).order_by(m.c.batch_id.desc())
                                   .offset(max(int(row.keep), 1) - 1).limit(1)).scalar()
                doomed = [] if nth is None else list(conn.execute(
                    select(m.c.transaction_id).where(and_(key, m.c.batch_id < nth)).order_by(m.c.batch_id)
                    .limit(rules.batch)).scalars())
            if not doomed:
                break
            if not budget.go():
                return removed, True
            with store.leader_tx(epoch) as conn:
                removed += conn.execute(delete(m).where(and_(key, m.c.transaction_id.in_(doomed)))).rowcount
            if len(doomed) < rules.batch:
                break
    return removed, False


# -- events --------------------------------------------------------------------------------
def prune_events(store: Store, epoch: int, now: float, rules: RetentionRules, budget: Slice) -> tuple[int, bool]:
    e = s.events
    job_cutoff = now - rules.events_days * DAY_S
    with store.read() as conn:
        crowded = [r.job_id for r in conn.execute(
            select(e.c.job_id).where(e.c.job_id.isnot(None)).group_by(e.c.job_id)
            .having(func.count() > rules.events_per_job))]
        oldest_kept = {job_id: conn.execute(select(e.c.seq).where(e.c.job_id == job_id).order_by(e.c.seq.desc())
                                            .offset(rules.events_per_job - 1).limit(1)).scalar()
                       for job_id in crowded}
    # SOURCES_RELEASED is the release line of a job resumed before jobs.restore carried it
    # (store/release_line.py): pruned, a later resume would restore a dropped slot's positions.
    wheres = [and_(e.c.job_id == job_id, e.c.seq < seq, e.c.at < job_cutoff, e.c.kind != "SOURCES_RELEASED")
              for job_id, seq in oldest_kept.items()]
    wheres.append(and_(e.c.job_id.is_(None), e.c.kind != "LEADER_ELECTED",
                       e.c.at < now - rules.global_events_days * DAY_S))
    removed = 0
    for where in wheres:
        while True:
            with store.read() as conn:
                seqs = list(conn.execute(select(e.c.seq).where(where).order_by(e.c.seq).limit(rules.batch))
                            .scalars())
            if not seqs:
                break
            if not budget.go():
                return removed, True
            with store.leader_tx(epoch) as conn:
                # by primary key alone: events never change once written
                removed += conn.execute(delete(e).where(e.c.seq.in_(seqs))).rowcount
            if len(seqs) < rules.batch:
                break
    return removed, False


# -- files ---------------------------------------------------------------------------------
def set_aside_directories(store: Store, data_dir: str, now: float, rules: RetentionRules) -> list[str]:
    """Set-aside checkpoint directories older than the rule, by the time in their name, and
    abandoned staging copies of a resume, by their last write."""
    with store.read() as conn:
        roots = {os.path.dirname(d.rstrip("/")) for (d,) in conn.execute(
            select(s.pipelines.c.checkpoint_dir).distinct())}
    base = os.path.join(data_dir, "checkpoints")
    if os.path.isdir(base):          # jobs whose history expired have no pipelines rows left
        roots.update(entry.path for entry in os.scandir(base) if entry.is_dir(follow_symlinks=False))
    cutoff_ms = (now - rules.set_aside_days * DAY_S) * 1000
    found = []
    for root in sorted(roots):
        if not os.path.isdir(root):
            continue
        for entry in os.scandir(root):
            if not entry.is_dir(follow_symlinks=False):
                continue
            match = SET_ASIDE.search(entry.name)
            if match and int(match.group(2)) < cutoff_ms:
                found.append(entry.path)
            elif RESTORING.search(entry.name) and entry.stat(follow_symlinks=False).st_mtime * 1000 < cutoff_ms:
                found.append(entry.path)
    return found


def ended_attempt_logs(store: Store, data_dir: str, now: float, rules: RetentionRules) -> list[str]:
    """Logs of attempts that no longer run, unwritten for longer than the rule."""
    base = os.path.join(data_dir, "logs")
    if not os.path.isdir(base):
        return []
    cutoff = now - rules.attempt_logs_days * DAY_S
    old: dict[int, str] = {}
    for job_dir in os.scandir(base):
        if not job_dir.is_dir(follow_symlinks=False):
            continue
        for entry in os.scandir(job_dir.path):
            match = ATTEMPT_LOG.match(entry.name)
            if match and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                old[int(match.group(1))] = entry.path
    if not old:
        return []
    with store.read() as conn:
        live = {r.attempt_id for r in conn.execute(select(s.attempts.c.attempt_id).where(and_(
            s.attempts.c.attempt_id.in_(sorted(old)), s.attempts.c.state.in_(sorted(ATTEMPT_LIVE)))))}
    return [path for attempt_id, path in sorted(old.items()) if attempt_id not in live]


def remove_paths(paths: list[str]) -> int:
    removed = 0
    for path in paths:
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
            removed += 1
        except FileNotFoundError:
            pass                       # removed meanwhile (by a previous leader): the same outcome
        parent = os.path.dirname(path)
        if os.path.basename(os.path.dirname(parent)) == "logs":
            _remove_if_empty(parent)
    return removed


def _remove_if_empty(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass
