"""What each job's CDC sources hold on their servers: measured by the leader, kept in the store.

A Postgres-CDC replication slot makes the server keep every WAL segment from the slot's
``restart_lsn`` on, for as long as the slot exists: a job cancelled or failed keeps its slot (so
it can resume) until its history expires, and the server's disk fills meanwhile. A MySQL-CDC
position holds nothing on the server, but once the server's binlog expiry passes it the job
can no longer resume. Both are shown per source (``Source.held``).

Who measures: the leader, in a thread of its own beside the reconcile loop (``SourceWatch``),
so a slow or unreachable database never holds a tick. Every ``every_s`` it asks each CDC
source of each job that may still resume (not FINISHED, not released) with a short timeout,
and replaces the job's ``source_holds`` rows in one transaction fenced by its epoch. Readers
(job-info, the UI, /metrics) read those rows: any coordinator answers at once and the same,
whatever the databases do. A failed measurement keeps the figures of the last good one and
says why, masked (a message never carries a job's secret).

Past ``warn_bytes`` (or once a position is lost) a source is flagged (``warned_at``) and a
``SOURCE_RETAINED_WARNING`` event and log line are written once, when it crosses; the flag
clears when it falls back under.

A pipeline a resume left out on purpose (``--fallback fresh``) is not in the job's current config,
but its slot stays: its sources are read from the config of the incarnation where it last ran
(coordinator/left_out_sources.py), measured and warned of like the others, their rows marked
``left_out``.

Each pass also looks at what releases left on the servers, no run's to drop (coordinator/left_held_watch.py).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Callable

from sqlalchemy import and_, delete, insert, select

from seatide.coordinator.left_held_watch import look_at_left_held
from seatide.coordinator.left_out_sources import left_out_configs, unloadable_note
from seatide.coordinator.source_release import may_hold
from seatide.store import schema as s
from seatide.store.clock import store_now
from seatide.secrets import mask_message
from seatide.store.db import NotLeader, Store, record_event
from seatide.store.event_masking import job_secrets
from seatide.store.runs import run_key
from seatide.store.states import JobStatus

log = logging.getLogger(__name__)

GIB = 1 << 30
WARN_BYTES_ENV = "SEATIDE_RETAINED_WARN_BYTES"
EVERY_ENV = "SEATIDE_RETAINED_CHECK_INTERVAL"


@dataclass(frozen=True)
class WatchRules:
    every_s: float = 60.0          # how often the leader measures
    warn_bytes: int = GIB          # retained WAL / binlog behind past this: a warning
    timeout_s: float = 5.0         # per source: connecting and asking

    @classmethod
    def from_environment(cls, every_s: float | None = None, warn_bytes: int | None = None) -> "WatchRules":
        """Flags first, then SEATIDE_RETAINED_CHECK_INTERVAL / SEATIDE_RETAINED_WARN_BYTES, then defaults."""
        try:
            every = every_s if every_s is not None else float(os.environ.get(EVERY_ENV) or cls.every_s)
        except ValueError:
            raise ValueError(f"{EVERY_ENV} = {os.environ.get(EVERY_ENV)!r} is not a number of seconds") from None
        if every <= 0:
            raise ValueError(f"the retained-size check interval must be more than 0 seconds, got {every:g}")
        try:
            warn = warn_bytes if warn_bytes is not None else parse_size(os.environ.get(WARN_BYTES_ENV) or str(cls.warn_bytes))
        except ValueError as exc:
            raise ValueError(f"{WARN_BYTES_ENV}: {exc}") from None
        return cls(every_s=every, warn_bytes=warn)


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20, "g": GIB, "gb": GIB, "gib": GIB, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}


def parse_size(text: str) -> int:
    """``1073741824``, ``512MiB``, ``1 GiB``, ``2g`` (binary units) -> bytes; ValueError saying what is accepted."""
    raw = str(text).strip().lower().replace(" ", "")
    number = raw.rstrip("kmgtib")
    unit = raw[len(number):]
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _UNITS or value < 0:
        raise ValueError(f"{text!r} is not a size: write bytes or a number with KiB, MiB, GiB or TiB, e.g. 1GiB")
    return int(value * _UNITS[unit])


@dataclass(frozen=True)
class Measured:
    pipeline_id: int
    plugin_id: str
    connector: str
    holds: str | None = None
    retained_bytes: int | None = None
    lost: bool = False
    state: str | None = None
    error: str | None = None
    left_out: bool = False      # its pipeline is one the job's current config leaves out


@dataclass
class JobSources:
    """A job's sources that may hold something, loaded once per job text (a cache entry)."""
    holding: list = field(default_factory=list)     # (pipeline id, index in pipeline, PluginSpec)
    secrets: frozenset = frozenset()
    pipelines: frozenset | None = None              # the config's pipeline ids; None: it does not load
    left_out: frozenset = frozenset()               # those of ``holding`` the current config leaves out
    error: str | None = None                        # why the config does not load (masked)
    unloadable: tuple = ()                          # (LeftOutConfig, error) of left-out pipelines not told


def load_sources(config_text: str, variables: dict, job_id: str) -> JobSources:
    """The job's sources that implement ``Source.held``, each with its pipeline; none when the
    config no longer loads (a plugin this version lacks: it holds nothing SeaTide can see)."""
    from seatide.config.loader import ConfigError, load_job_text
    from seatide.plan.dag import build_plan
    from seatide.plugin.base import Source
    from seatide.secrets import secret_values

    secrets = secret_values(config_text, variables)
    try:
        plan = build_plan(load_job_text(config_text, variables, source_name=f"job {job_id}"))
    except ConfigError as exc:
        return JobSources([], secrets, error=mask_message(str(exc), secrets)[:300])
    holding = [(p.pipeline_id, index, spec) for p in plan.pipelines for index, spec in enumerate(p.sources)
               if type(spec.plugin).held is not Source.held]
    return JobSources(holding, secrets, frozenset(p.pipeline_id for p in plan.pipelines))


def with_left_out(store: Store, job, sources: JobSources) -> JobSources:
    """``sources`` and those of the pipelines the current config leaves out, read from the config of
    the incarnation where they last ran (coordinator/left_out_sources.py): their slots retain WAL too."""
    with store.read() as conn:      # the current config not loading: its pipelines as the resume recorded them (F1)
        earlier = left_out_configs(conn, job.job_id, job.run_id, job.incarnation, sources.pipelines)
    holding, secrets, left, unloadable = list(sources.holding), set(sources.secrets), set(), []
    for then in earlier:
        variables = json.loads(then.variables or "{}")
        loaded = load_sources(then.config, variables, job.job_id)
        if loaded.pipelines is None and then.pipeline_ids - left and may_hold(then.config, variables):
            # shown as an error row, never hidden (review F2)
            unloadable.append((then, loaded.error or "it does not load"))
        holding += [entry for entry in loaded.holding if entry[0] in then.pipeline_ids - left]
        secrets |= loaded.secrets
        left |= then.pipeline_ids & (loaded.pipelines or frozenset())
    return JobSources(holding, frozenset(secrets), sources.pipelines, frozenset(left), sources.error, tuple(unloadable))


def newest_offset(conn, job_id: str, pipeline_id: int, index: int) -> dict | None:
    """The source's part of its pipeline's newest completed checkpoint, in any incarnation (a
    resumed one continues from its predecessor's until it commits a batch)."""
    c = s.checkpoints.c
    text = conn.execute(select(c.source_offsets).where(and_(
        c.job_id == job_id, c.pipeline_id == pipeline_id, c.kind == "CHECKPOINT", c.status == "COMPLETED"))
        .order_by(c.checkpoint_id.desc()).limit(1)).scalar()
    if not text:
        return None
    sources = json.loads(text).get("sources") or []
    if index < len(sources) and isinstance(sources[index], dict):
        return sources[index]
    return None


def measure_job(store: Store, job, sources: JobSources, timeout_s: float) -> list[Measured]:
    from seatide.secrets import mask_message

    key = run_key(job.job_id, job.run_id)
    found = []
    for pipeline_id, index, spec in sources.holding:
        left_out = pipeline_id in sources.left_out
        with store.read() as conn:
            offset = newest_offset(conn, job.job_id, pipeline_id, index)
        try:
            held = spec.plugin.held(key, pipeline_id, spec.plugin_id, offset, timeout_s)
        except Exception as exc:  # noqa: BLE001 - a database down or refusing: shown, never raised
            message = mask_message(f"{type(exc).__name__}: {exc}".strip(), sources.secrets)
            found.append(Measured(pipeline_id, spec.plugin_id, spec.name, error=message[:1000], left_out=left_out))
            continue
        if held is not None:
            found.append(Measured(pipeline_id, spec.plugin_id, spec.name, held.holds, held.retained_bytes,
                                  held.lost, held.state, left_out=left_out))
    h = s.source_holds.c
    for then, error in sources.unloadable:      # the rows last measured keep their figures, with the error
        with store.read() as conn:
            last = conn.execute(select(h.pipeline_id, h.plugin_id, h.connector, h.holds).where(and_(
                h.job_id == job.job_id, h.pipeline_id.in_(sorted(then.pipeline_ids))))).all()
        note = unloadable_note(key, then, error, [row.holds for row in last if row.holds])[:1000]
        found += [Measured(row.pipeline_id, row.plugin_id, row.connector, error=note, left_out=True) for row in last]
        found += [Measured(pid, "?", "unknown", error=note, left_out=True)
                  for pid in sorted(then.pipeline_ids - {row.pipeline_id for row in last})]
    return found


def record_measurements(store: Store, epoch: int, actor: str, job, measured: list[Measured],
                        warn_bytes: int, secrets: frozenset | None = None) -> list[dict]:
    """Replace the job's rows, fenced by ``epoch``, unless it moved on meanwhile (released, resumed
    or forgotten). A failed measurement keeps the last figures. Returns the warnings raised now. ``secrets``: the
    job's (its configs', ``JobSources.secrets``; else its own config's), masked in the warning's log line."""
    h = s.source_holds
    raised = []
    with store.leader_tx(epoch) as conn:
        now = store_now(conn)
        current = conn.execute(select(s.jobs.c.incarnation, s.jobs.c.release, s.jobs.c.run_id).where(
            s.jobs.c.job_id == job.job_id)).first()
        if current is None or current.release is not None or current.run_id != job.run_id:
            conn.execute(delete(h).where(h.c.job_id == job.job_id))
            return []
        before = {(r.pipeline_id, r.plugin_id): r for r in conn.execute(select(h).where(h.c.job_id == job.job_id))}
        conn.execute(delete(h).where(h.c.job_id == job.job_id))
        for m in measured:
            last = before.get((m.pipeline_id, m.plugin_id))
            measured_at = now
            if m.error is not None and last is not None:      # keep what was last known, and when
                m = Measured(m.pipeline_id, m.plugin_id, m.connector, last.holds, last.retained_bytes, last.lost,
                             last.state, m.error, m.left_out)
                measured_at = last.measured_at
            over = m.lost or (m.retained_bytes is not None and m.retained_bytes >= warn_bytes)
            warned_at = (last.warned_at if last is not None and last.warned_at is not None else now) if over else None
            conn.execute(insert(h).values(
                job_id=job.job_id, incarnation=current.incarnation, pipeline_id=m.pipeline_id, plugin_id=m.plugin_id,
                connector=m.connector, holds=m.holds, retained_bytes=m.retained_bytes, lost=m.lost, state=m.state,
                error=m.error, measured_at=measured_at, warned_at=warned_at, left_out=m.left_out))
            if over and (last is None or last.warned_at is None):
                detail = dict(pipeline=m.pipeline_id, source=m.plugin_id, connector=m.connector, holds=m.holds,
                              retainedBytes=m.retained_bytes, warnBytes=warn_bytes, lost=m.lost, state=m.state,
                              **({"leftOut": True} if m.left_out else {}))
                record_event(conn, "SOURCE_RETAINED_WARNING", actor, job.job_id, current.incarnation, epoch,
                             level="WARNING", **detail)
                raised.append(detail)
    secrets = job_secrets(job) if secrets is None else secrets
    for detail in raised:       # a slot named after a secret variable (review 9, F10)
        log.warning("%s", mask_message(
            f"job {job.job_id}: {detail['source']} {detail['connector']} {detail['holds']} ({detail['retainedBytes']} "
            f"bytes, warning at {warn_bytes}{', its position is lost' if detail['lost'] else ''}): resume it or "
            f"release it (seatide cancel {job.job_id} --release)", secrets))
    return raised


def watched_jobs(store: Store) -> list:
    """Jobs that may still resume: not FINISHED (its cleanup released its sources), not released."""
    j = s.jobs.c
    with store.read() as conn:
        return conn.execute(select(j.job_id, j.incarnation, j.run_id, j.config, j.variables).where(and_(
            j.status != JobStatus.FINISHED, j.release.is_(None))).order_by(j.created_at)).all()


class SourceWatch:
    """The leader's measuring thread. ``leading`` gives the epoch while this process leads (else None)."""

    def __init__(self, store: Store, leading: Callable[[], int | None], actor: str, rules: WatchRules = WatchRules()):
        self.store = store
        self.leading = leading
        self.actor = actor
        self.rules = rules
        self._sources: dict[tuple, JobSources] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="source-watch", daemon=True)

    def start(self) -> "SourceWatch":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        # The first pass waits one interval: a local run's short job never pays for it.
        while not self._stop.wait(self.rules.every_s):
            try:
                epoch = self.leading()
                if epoch is not None:
                    self.run(epoch)
            except NotLeader:
                pass
            except Exception:  # housekeeping: it must never end the thread
                log.exception("measuring what the jobs' sources hold failed; again in %.0f s", self.rules.every_s)

    def run(self, epoch: int) -> int:
        """One pass over every watched job; the number of jobs measured."""
        jobs = watched_jobs(self.store)
        keys = set()
        measured = 0
        for job in jobs:
            if self._stop.is_set() or self.leading() != epoch:
                break
            key = (job.job_id, job.incarnation, job.run_id)
            keys.add(key)
            sources = self._sources.get(key)
            if sources is None:
                sources = self._sources[key] = with_left_out(self.store, job, load_sources(
                    job.config, json.loads(job.variables or "{}"), job.job_id))
            if not sources.holding and not sources.unloadable:
                continue
            record_measurements(self.store, epoch, self.actor, job, measure_job(
                self.store, job, sources, self.rules.timeout_s), self.rules.warn_bytes, sources.secrets)
            measured += 1
        for gone in set(self._sources) - keys:      # finished, released or forgotten: loaded no more
            del self._sources[gone]
        if not self._stop.is_set() and self.leading() == epoch:     # what releases left, whatever run's
            look_at_left_held(self.store, epoch, self.actor, self.rules.timeout_s)
        return measured
