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
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Callable

from sqlalchemy import and_, delete, insert, select

from seatide.coordinator.left_out_sources import left_out_configs
from seatide.plugin.server_errors import lasting_fix, passing
from seatide.store import schema as s
from seatide.store.clock import store_now
from seatide.store.db import NotLeader, Store, record_event
from seatide.store.runs import run_key, spark_checkpoint_dir
from seatide.store.states import JobStatus
from seatide.store.unusable_checkpoints import PositionsAsked

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
    except ConfigError:
        return JobSources([], secrets)
    holding = [(p.pipeline_id, index, spec) for p in plan.pipelines for index, spec in enumerate(p.sources)
               if type(spec.plugin).held is not Source.held]
    return JobSources(holding, secrets, frozenset(p.pipeline_id for p in plan.pipelines))


def with_left_out(store: Store, job, sources: JobSources) -> JobSources:
    """``sources`` and those of the pipelines the current config leaves out, read from the config of
    the incarnation where they last ran (coordinator/left_out_sources.py): their slots retain WAL too."""
    if sources.pipelines is None:       # the current config does not load: which are left out is not known
        return sources
    with store.read() as conn:
        earlier = left_out_configs(conn, job.job_id, job.run_id, job.incarnation, sources.pipelines)
    holding, secrets, left = list(sources.holding), set(sources.secrets), set()
    for then in earlier:
        loaded = load_sources(then.config, json.loads(then.variables or "{}"), job.job_id)
        holding += [entry for entry in loaded.holding if entry[0] in then.pipeline_ids - left]
        secrets |= loaded.secrets
        left |= then.pipeline_ids & (loaded.pipelines or frozenset())
    return JobSources(holding, frozenset(secrets), sources.pipelines, frozenset(left))


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


def positions_gone(job, plan, restored: list[tuple[int, str, int | None]], deadline_s: float = 5.0) -> PositionsAsked:
    """The pipelines a resume restores in place (id, directory, the batch the store recorded) whose
    sources' servers no longer have the position their checkpoint resumes from, each with the error
    its read would fail with (``Source.position_gone``). Asked by the process recording the resume,
    which reads the checkpoint directories already (store/restore.py): such a pipeline's checkpoint
    cannot be used, so the resume is refused (REST 409, CLI exit 1, nothing recorded) unless its
    fallback is ``fresh``, which starts that pipeline over.

    Every source is asked at once, and the whole check waits ``deadline_s`` at most: the resume is
    answered while a client waits for it (the CLI's HTTP client gives up after 30 s), and a server
    that takes connections without answering holds its own ask longer than its timeout (libpq
    tries twice with sslmode=prefer). A source not answered by then, like one that cannot be reached
    (down, or out of this process's network), is not checked here: the driver's read checks the same
    and fails alike. Its ask goes on in a daemon thread, bounded by its own timeout, answered to no one.
    Each such source is in the answer's ``unreached``, with its server's address and the error (masked):
    the resume's answer says it was not checked, and why (outside review 9, F4). A server that answered with
    an error (a role it refuses, a privilege missing) or a bug is no unreachable server: ``failed`` names the
    error and its fix, and the resume goes on likewise (outside review of 7d56489..26756a7, F6)."""
    from seatide.secrets import mask_message, secret_values

    asks = _position_asks(job, plan, restored)
    secrets = secret_values(job.config, json.loads(job.variables or "{}"))
    unreached: dict[tuple[int, int], str] = {}
    failed: dict[tuple[int, int], str] = {}
    answers: dict[tuple[int, int], str | None] = {}
    done = threading.Event()
    lock = threading.Lock()

    def ask(pipeline_id: int, index: int, spec, offset: dict) -> None:
        try:
            why = spec.plugin.position_gone(run_key(job.job_id, job.run_id), pipeline_id, spec.plugin_id, offset,
                                            deadline_s)
        except Exception as exc:  # noqa: BLE001 - not known here: the read decides
            log.info("job %s pipeline %s: %s's position not checked before the resume (%s); its read will",
                     job.job_id, pipeline_id, spec.plugin_id, type(exc).__name__)
            why = None
            with lock:
                said = " ".join(f"{type(exc).__name__}: {exc}".split())       # libpq's hint is on a line of its own
                said = mask_message(said, secrets)[:300]
                if passing(exc):    # unreachable, or a condition that passes (busy, starting up)
                    unreached[(pipeline_id, index)] = said
                else:       # the server answered (a role it refuses, a privilege) or a bug: named as what it is
                    failed[(pipeline_id, index)] = f"{said}; {lasting_fix(exc)}"
        with lock:
            answers[(pipeline_id, index)] = why
            if len(answers) == len(asks):
                done.set()

    for pipeline_id, index, spec, offset in asks:
        threading.Thread(target=ask, args=(pipeline_id, index, spec, offset), daemon=True,
                         name=f"position-check-{job.job_id}-{pipeline_id}-{index}").start()
    if asks and not done.wait(deadline_s):
        with lock:
            late = [f"{pid}/{spec.plugin_id}" for pid, index, spec, _ in asks if (pid, index) not in answers]
        log.info("job %s: sources %s did not answer the position check within %.0f s; their reads will check",
                 job.job_id, ", ".join(late), deadline_s)
    asked = PositionsAsked()
    with lock:
        for (pipeline_id, _), why in sorted(answers.items()):
            if why is not None:
                asked.gone.setdefault(pipeline_id, why)
        for pipeline_id, index, spec, _ in asks:
            error = unreached.get((pipeline_id, index))
            where = f" at {spec.plugin.server_address()}" if spec.plugin.server_address() else ""
            if (pipeline_id, index) in failed:
                asked.failed.setdefault(pipeline_id, []).append(
                    f"{spec.name} ({spec.plugin_id}){where}: the server answered the position check with an error "
                    f"({failed[(pipeline_id, index)]})")
                continue
            if error is None and (pipeline_id, index) in answers:
                continue
            error = error or f"no answer within {deadline_s:g} s"
            asked.unreached.setdefault(pipeline_id, []).append(
                f"{spec.name} ({spec.plugin_id}){where} could not be reached to check its checkpoint's position "
                f"({error})")
    return asked


def _position_asks(job, plan, restored) -> list[tuple[int, int, object, dict]]:
    """(pipeline, source index, its spec, its checkpointed offset) of each source that can tell."""
    from seatide.plugin.base import Source
    from seatide.runtime.offset_log import logged_offsets
    from seatide.runtime.spark_checkpoint import restore_point

    asks = []
    for pipeline_id, directory, recorded in restored:
        spark_dir = spark_checkpoint_dir(directory)
        batch = restore_point(spark_dir, recorded)
        offsets = logged_offsets(spark_dir, batch) if batch is not None else None
        for index, spec in enumerate(plan.pipeline(pipeline_id).sources):
            offset = offsets[index] if offsets and index < len(offsets) else None
            if offset is not None and type(spec.plugin).position_gone is not Source.position_gone:
                asks.append((pipeline_id, index, spec, offset))
    return asks


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
    return found


def record_measurements(store: Store, epoch: int, actor: str, job, measured: list[Measured],
                        warn_bytes: int) -> list[dict]:
    """Replace the job's rows, fenced by ``epoch``, unless it moved on meanwhile (released, resumed
    or forgotten). A failed measurement keeps the last figures. Returns the warnings raised now."""
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
    for detail in raised:
        log.warning("job %s: %s %s %s (%s bytes, warning at %s%s): resume it or release it "
                    "(seatide cancel %s --release)", job.job_id, detail["source"], detail["connector"], detail["holds"],
                    detail["retainedBytes"], warn_bytes, ", its position is lost" if detail["lost"] else "", job.job_id)
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
            if not sources.holding:
                continue
            record_measurements(self.store, epoch, self.actor, job,
                                measure_job(self.store, job, sources, self.rules.timeout_s), self.rules.warn_bytes)
            measured += 1
        for gone in set(self._sources) - keys:      # finished, released or forgotten: loaded no more
            del self._sources[gone]
        return measured
