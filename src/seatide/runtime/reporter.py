"""What a driver writes to the store, each write fenced by its attempt.

If the attempt is no longer the job's current live attempt (the leader declared it lost
and started another), every method raises ``AttemptFenced`` and the driver stops: a
zombie driver cannot record progress, complete a pipeline or commit a batch.

A store session the server ends under a step (its idle limit while the driver was paused,
a restart, a terminated backend) fails neither the step nor the attempt: the step is taken
again on a new session while the attempt's fence holds, up to its self-fence
(``store/sessions.py``), and checks the fence again in its own transaction. Each step is
idempotent: it compares a state, or inserts a key once. Only history may be counted twice
(an event, a restore or a failed checkpoint counted, a savepoint id reserved and left
PENDING) when the session ended while its COMMIT was in flight and the first try had landed.
"""

from __future__ import annotations

import functools
import json
import threading
from typing import Callable, Iterable, TypeVar

from sqlalchemy import and_, func, insert, select, update
from sqlalchemy.engine import Connection

from seatide import clock, failpoints
from seatide.secrets import mask_message
from seatide.store import schema as s
from seatide.store.batch_starts import record_start
from seatide.store.clock import read_store_now, store_now
from seatide.store.events import record_event
from seatide.store.db import Store
from seatide.store.sessions import again_on_new_session
from seatide.store.states import AttemptState, PipelineStatus, check_attempt, check_pipeline
from seatide.timeouts import Timeouts

T = TypeVar("T")

def _step(method):
    """One store step of the driver's, taken again on a new session when the store ends its
    session (see the module's doc)."""
    @functools.wraps(method)
    def step(self, *args, **kwargs):
        return again_on_new_session(lambda: method(self, *args, **kwargs), what=f"driver {method.__name__}",
                                    within=self.keep_trying_for, holds=self.fence_holds)
    return step


class AttemptReporter:
    def __init__(self, store: Store, job_id: str, incarnation: int, attempt_id: int,
                 secrets: frozenset[str] = frozenset()):
        self.store = store
        # Spark's messages may quote options (a JDBC URL, a password): errors are stored masked.
        self.secrets = secrets
        self.job_id = job_id
        self.incarnation = incarnation
        self.attempt_id = attempt_id
        self.actor = f"driver:{attempt_id}"
        self.ended = False     # set once this driver has recorded how its attempt ended
        self.ending = False    # set as it starts recording it (heartbeat.py: not a fence)
        self.first_commit = threading.Event()     # set once a batch is committed (a warm driver says so)
        # A step cut off by the end of its store session is taken again while these say so: the
        # heartbeat sets them to its own fence and self-fence (runtime/heartbeat.py).
        self.fence_holds: Callable[[], bool] = lambda: True
        self.keep_trying_for = Timeouts.driver_self_fence_after

    @_step
    def read(self, query: Callable[[Connection], T]) -> T:
        """``query(conn)`` in a read of the store, as a step of this driver's."""
        with self.store.read() as conn:
            return query(conn)

    def _tx(self):
        return self.store.attempt_tx(self.job_id, self.attempt_id)

    def _pipeline_where(self, *pipeline_ids: int):
        return and_(s.pipelines.c.job_id == self.job_id, s.pipelines.c.incarnation == self.incarnation,
                    s.pipelines.c.pipeline_id.in_(pipeline_ids))

    # -- attempt -------------------------------------------------------------------------
    @_step
    def mark_running(self, pid: int) -> None:
        with self._tx() as conn:
            state = self._attempt_state(conn)
            if state != AttemptState.RUNNING:
                check_attempt(state, AttemptState.RUNNING)
                conn.execute(update(s.attempts).where(s.attempts.c.attempt_id == self.attempt_id)
                             .values(state=AttemptState.RUNNING, pid=pid, heartbeat_at=store_now(conn)))

    @_step
    def heartbeat(self) -> str:
        """Prove liveness; returns the job's desired state (RUN, CANCEL, SAVEPOINT)."""
        with self.store.attempt_tx(self.job_id, self.attempt_id, job_may_be_terminal=True) as conn:
            conn.execute(update(s.attempts).where(s.attempts.c.attempt_id == self.attempt_id)
                         .values(heartbeat_at=store_now(conn)))   # judged by the store's clock
            return conn.execute(select(s.jobs.c.desired).where(s.jobs.c.job_id == self.job_id)).scalar()

    @_step
    def task_progress(self, tasks_done: int, pipelines: Iterable[int] = ()) -> None:
        """Spark tasks completed so far (written only when the count moved): work, not just life;
        ``pipelines``: those whose own tasks moved (each is judged on its own).

        Progress ends a HUNG flag, as a committed batch ends a stale one. Like a heartbeat, it
        is still taken once the job has ended: the leader marks the job FINISHED as soon as
        its last pipeline ends, and the driver's next progress sample must not turn that into
        a fenced exit before the driver records its own attempt's end."""
        with self.store.attempt_tx(self.job_id, self.attempt_id, job_may_be_terminal=True) as conn:
            conn.execute(update(s.attempts).where(s.attempts.c.attempt_id == self.attempt_id)
                         .values(progress_at=store_now(conn), tasks_done=tasks_done))
            if moved := sorted(pipelines):
                conn.execute(update(s.pipelines).where(self._pipeline_where(*moved)).values(progress_at=store_now(conn)))
            self._clear_hung(conn)

    def _clear_hung(self, conn) -> None:
        """The HUNG flag ends once every pipeline the leader judges has moved since it was raised
        (a committed batch, or a task of its own; the attempt's, for one with none counted):
        one that keeps going must not clear the flag another raised (issue 30, finding 10)."""
        p, j = s.pipelines.c, s.jobs.c
        behind = and_(func.coalesce(p.last_checkpoint_at, 0.0) < j.hung_since, p.progress_at.isnot(None),
                      p.progress_at < j.hung_since)
        conn.execute(update(s.jobs).where(and_(j.job_id == self.job_id, j.hung_since.isnot(None),
                                               ~self._judged_pipelines(behind).exists())).values(hung_since=None))

    def _clear_stale(self, conn) -> None:
        """The stale flag ends once every pipeline the leader judges has committed since it was raised."""
        p, j = s.pipelines.c, s.jobs.c
        behind = func.coalesce(p.last_checkpoint_at, 0.0) < j.stale_since
        conn.execute(update(s.jobs).where(and_(j.job_id == self.job_id, j.stale_since.isnot(None),
                                               ~self._judged_pipelines(behind).exists())).values(stale_since=None))

    def _judged_pipelines(self, condition):
        """This incarnation's running pipelines with data pending that meet ``condition``."""
        p = s.pipelines.c
        return select(p.pipeline_id).where(and_(
            p.job_id == self.job_id, p.incarnation == self.incarnation, p.status == PipelineStatus.RUNNING,
            p.idle.is_(False), condition))

    @_step
    def fence(self) -> float:
        """Raise ``AttemptFenced`` unless this attempt is still current (before a commit point);
        the store's time."""
        with self._tx() as conn:
            return read_store_now(conn)

    def end_attempt(self, succeeded: bool, error: str | None = None) -> None:
        """The driver's own word on how its attempt ended; the worker records the process exit."""
        new = AttemptState.SUCCEEDED if succeeded else AttemptState.FAILED
        error = mask_message(error, self.secrets)
        failpoints.hit("driver.before_end_attempt")
        self.ending = True
        self._record_end(new, error)
        self.ended = True
        failpoints.hit("driver.after_end_attempt")

    @_step
    def _record_end(self, new: str, error: str | None) -> None:
        """Taken again after an ended session, a first try that had landed is refused (the
        attempt is no longer live): the driver exits as fenced, its recorded end stands."""
        with self.store.attempt_tx(self.job_id, self.attempt_id, job_may_be_terminal=True) as conn:
            check_attempt(self._attempt_state(conn), new)
            conn.execute(update(s.attempts).where(s.attempts.c.attempt_id == self.attempt_id)
                         .values(state=new, error=error))   # ended_at: set by the worker that reaps it
            record_event(conn, f"ATTEMPT_{new}", self.actor, self.job_id, self.incarnation,
                         attempt=self.attempt_id, error=error)

    def _attempt_state(self, conn) -> str:
        return conn.execute(select(s.attempts.c.state).where(s.attempts.c.attempt_id == self.attempt_id)).scalar()

    # -- pipelines -----------------------------------------------------------------------
    @_step
    def pipeline_status(self, pipeline_id: int, new: str, error: str | None = None,
                        while_desired: str | None = None) -> bool:
        """False: not written, the job's desired state being no longer ``while_desired`` (read in
        this fenced transaction: a cancel recorded since the driver last read it is not overtaken)."""
        with self._tx() as conn:
            if while_desired is not None and while_desired != conn.execute(
                    select(s.jobs.c.desired).where(s.jobs.c.job_id == self.job_id)).scalar():
                return False
            old = conn.execute(select(s.pipelines.c.status).where(self._pipeline_where(pipeline_id))).scalar()
            if old == new == PipelineStatus.RUNNING:     # started again by a new attempt
                conn.execute(update(s.pipelines).where(self._pipeline_where(pipeline_id))
                             .values(started_at=store_now(conn), idle=False, waiting=None))
                return True
            if old == new:
                return True
            check_pipeline(old, new)
            error = mask_message(error, self.secrets)
            now = store_now(conn)
            values: dict = {"status": new, "error": error, "waiting": None}
            values["started_at" if new == PipelineStatus.RUNNING else "finished_at"] = now
            conn.execute(update(s.pipelines).where(self._pipeline_where(pipeline_id)).values(**values))
            record_event(conn, f"PIPELINE_{new}", self.actor, self.job_id, self.incarnation,
                         pipeline=pipeline_id, attempt=self.attempt_id, error=error)
        return True

    @_step
    def source_ended(self, pipeline_id: int, plugin_id: str) -> None:
        with self._tx() as conn:
            key = and_(s.source_ends.c.job_id == self.job_id, s.source_ends.c.incarnation == self.incarnation,
                       s.source_ends.c.pipeline_id == pipeline_id, s.source_ends.c.plugin_id == plugin_id)
            if conn.execute(select(s.source_ends.c.plugin_id).where(key)).first() is None:
                conn.execute(insert(s.source_ends).values(
                    job_id=self.job_id, incarnation=self.incarnation, pipeline_id=pipeline_id,
                    plugin_id=plugin_id, ended_at=store_now(conn)))

    @_step
    def checkpoint_prepared(self, pipeline_id: int, source: str | None, set_aside: str | None) -> None:
        """The resume's checkpoint move for this pipeline is done (see runtime.checkpoint_move.prepare_checkpoint)."""
        with self._tx() as conn:
            record_event(conn, "CHECKPOINT_PREPARED", self.actor, self.job_id, self.incarnation,
                         pipeline=pipeline_id, source=source, setAside=set_aside, attempt=self.attempt_id)

    @_step
    def pipeline_restored(self, pipeline_id: int, from_batch: int) -> None:
        """The pipeline starts from an existing checkpoint, after batch ``from_batch``
        (``spark_checkpoint.restore_point``)."""
        with self._tx() as conn:
            conn.execute(update(s.pipelines).where(self._pipeline_where(pipeline_id)).values(
                restores=s.pipelines.c.restores + 1))
            record_event(conn, "CHECKPOINT_RESTORED", self.actor, self.job_id, self.incarnation,
                         pipeline=pipeline_id, batch=from_batch, attempt=self.attempt_id)

    def recorded_batch(self, pipeline_id: int) -> int | None:
        """The newest batch the store recorded for the pipeline: this incarnation's, or for a
        resumed one the batch its checkpoint or savepoint held (store/restore.py)."""
        return self.read(lambda conn: conn.execute(select(s.pipelines.c.last_batch_id).where(
            self._pipeline_where(pipeline_id))).scalar())

    def savepoint(self, pipelines: dict[int, int], copy) -> int:
        """Record a savepoint of stopped pipelines ({pipeline: last batch}); ``copy(id)`` makes its copy.

        Two short transactions around the copy, never the copy inside one (it would hold the
        store's write lock, or the job's row lock, for as long as the disk takes): the id is
        reserved as PENDING, the copy made, then the savepoint COMPLETED. A savepoint left
        PENDING by a crash is never restored from."""
        savepoint_id = self._reserve_savepoint(pipelines)
        started = clock.monotonic()      # a duration: this process's own clock
        copy(savepoint_id)
        self._complete_savepoint(savepoint_id, pipelines, int((clock.monotonic() - started) * 1000))
        return savepoint_id

    @_step
    def _reserve_savepoint(self, pipelines: dict[int, int]) -> int:
        with self._tx() as conn:
            savepoint_id = (conn.execute(select(func.max(s.checkpoints.c.checkpoint_id)).where(
                s.checkpoints.c.job_id == self.job_id)).scalar() or 0) + 1
            conn.execute(insert(s.checkpoints).values(
                job_id=self.job_id, incarnation=self.incarnation, checkpoint_id=savepoint_id, pipeline_id=0,
                batch_id=max(pipelines.values(), default=-1), kind="SAVEPOINT", status="PENDING",
                created_at=store_now(conn), duration_ms=0, rows=0,
                source_offsets=json.dumps({"pipelines": {str(k): v for k, v in pipelines.items()}}),
                fingerprint="", attempt_id=self.attempt_id))
        return savepoint_id

    @_step
    def _complete_savepoint(self, savepoint_id: int, pipelines: dict[int, int], duration_ms: int) -> None:
        with self._tx() as conn:
            done = conn.execute(update(s.checkpoints).where(and_(
                s.checkpoints.c.job_id == self.job_id, s.checkpoints.c.checkpoint_id == savepoint_id,
                s.checkpoints.c.status == "PENDING")).values(status="COMPLETED", duration_ms=duration_ms)).rowcount
            if done:
                record_event(conn, "SAVEPOINT_COMPLETED", self.actor, self.job_id, self.incarnation,
                             savepoint=savepoint_id, pipelines=pipelines)

    @_step
    def mark_pipeline(self, pipeline_id: int, **marks) -> None:
        """``idle`` (caught up with its sources), ``waiting`` (what its start waits for; None: nothing now)."""
        if "waiting" in marks:
            marks["waiting"] = mask_message(marks["waiting"], self.secrets)
        with self._tx() as conn:
            conn.execute(update(s.pipelines).where(self._pipeline_where(pipeline_id)).values(**marks))

    @_step
    def rows_read(self, pipeline_id: int, batch_id: int, rows: int) -> None:
        """Count a batch's input rows once, however often its progress is reported."""
        with self._tx() as conn:
            where = and_(self._pipeline_where(pipeline_id),
                         (s.pipelines.c.read_batch_id.is_(None)) | (s.pipelines.c.read_batch_id < batch_id))
            conn.execute(update(s.pipelines).where(where).values(
                rows_read=s.pipelines.c.rows_read + rows, read_batch_id=batch_id))

    # -- sink commit decisions (runtime.commit_log) --------------------------------------
    # A decision is found by its transaction id, whichever incarnation made it: the id carries
    # the run and the lineage (a branch of the pipeline's checkpoints), so a resumed incarnation
    # continuing the same lineage rolls forward what the last one decided, and nothing else.
    def _manifest_where(self, pipeline_id: int, plugin_id: str, transaction_id: str):
        m = s.sink_manifests
        return and_(m.c.job_id == self.job_id, m.c.pipeline_id == pipeline_id, m.c.plugin_id == plugin_id,
                    m.c.transaction_id == transaction_id)

    @_step
    def decide_batch(self, pipeline_id: int, plugin_id: str, batch_id: int, transaction_id: str,
                     manifest: dict) -> dict:
        """A file sink's commit point for one batch; returns the manifest that stands decided.

        Fenced like every other write of this driver: once another attempt is current, this
        raises ``AttemptFenced`` and the batch publishes nothing. A batch decided already (by
        an earlier try) keeps its first decision, which the caller then publishes."""
        m = s.sink_manifests
        with self._tx() as conn:
            where = self._manifest_where(pipeline_id, plugin_id, transaction_id)
            earlier = conn.execute(select(m.c.manifest).where(where)).scalar()
            if earlier is not None:
                return json.loads(earlier)
            conn.execute(insert(m).values(
                job_id=self.job_id, incarnation=self.incarnation, pipeline_id=pipeline_id, plugin_id=plugin_id,
                transaction_id=transaction_id, batch_id=batch_id, attempt_id=self.attempt_id, status="DECIDED",
                manifest=json.dumps(manifest), decided_at=store_now(conn), published_at=None))
        return manifest

    @_step
    def decided_manifest(self, pipeline_id: int, plugin_id: str, transaction_id: str) -> tuple[str, dict] | None:
        """(status, manifest) of a decided batch, or None when it was never decided."""
        m = s.sink_manifests
        with self.store.read() as conn:
            row = conn.execute(select(m.c.status, m.c.manifest).where(
                self._manifest_where(pipeline_id, plugin_id, transaction_id))).first()
            failpoints.hit("driver.reading_decision")    # tests pause a driver inside a read transaction here
        return None if row is None else (row.status, json.loads(row.manifest))

    @_step
    def unpublished_manifests(self, pipeline_id: int, plugin_id: str,
                              transaction_prefix: str) -> list[tuple[int, str, dict]]:
        """(batch, transaction id, manifest) of the decided, unpublished batches of the lineage
        whose transaction ids start with ``transaction_prefix``, by any incarnation."""
        m = s.sink_manifests
        with self.store.read() as conn:
            rows = conn.execute(select(m.c.batch_id, m.c.transaction_id, m.c.manifest).where(and_(
                m.c.job_id == self.job_id, m.c.pipeline_id == pipeline_id, m.c.plugin_id == plugin_id,
                m.c.status == "DECIDED")).order_by(m.c.batch_id)).all()
        return [(r.batch_id, r.transaction_id, json.loads(r.manifest)) for r in rows
                if r.transaction_id.startswith(transaction_prefix)]

    @_step
    def batch_published(self, pipeline_id: int, plugin_id: str, transaction_id: str) -> None:
        """The decided batch's files are in place (bookkeeping: a roll-forward is then a no-op)."""
        m = s.sink_manifests
        with self._tx() as conn:
            conn.execute(update(m).where(and_(self._manifest_where(pipeline_id, plugin_id, transaction_id),
                                              m.c.status == "DECIDED"))
                         .values(status="PUBLISHED", published_at=store_now(conn)))

    # -- checkpoints ---------------------------------------------------------------------
    @_step
    def batch_started(self, pipeline_id: int, batch_id: int, lineage: str) -> None:
        """Before the first sink write of a batch (store/batch_starts.py)."""
        with self._tx() as conn:
            record_start(conn, self._pipeline_where(pipeline_id), batch_id, lineage)

    @_step
    def batch_committed(self, pipeline_id: int, batch_id: int, rows: int, duration_ms: int,
                        offsets: dict | None, fingerprint: str, kind: str = "CHECKPOINT") -> int | None:
        """Record a committed micro-batch as the job's next checkpoint (once per batch)."""
        with self._tx() as conn:
            seen = conn.execute(select(s.checkpoints.c.checkpoint_id).where(and_(
                s.checkpoints.c.job_id == self.job_id, s.checkpoints.c.incarnation == self.incarnation,
                s.checkpoints.c.pipeline_id == pipeline_id, s.checkpoints.c.batch_id == batch_id,
                s.checkpoints.c.status == "COMPLETED", s.checkpoints.c.kind == kind))).scalar()
            if seen is not None:
                self.first_commit.set()
                return seen
            newest = conn.execute(select(func.max(s.checkpoints.c.checkpoint_id)).where(
                s.checkpoints.c.job_id == self.job_id)).scalar() or 0
            checkpoint_id, now = newest + 1, read_store_now(conn)
            conn.execute(insert(s.checkpoints).values(
                job_id=self.job_id, incarnation=self.incarnation, checkpoint_id=checkpoint_id,
                pipeline_id=pipeline_id, batch_id=batch_id, kind=kind, status="COMPLETED",
                created_at=now, duration_ms=duration_ms, rows=rows,
                source_offsets=json.dumps(offsets) if offsets is not None else None,
                fingerprint=fingerprint, attempt_id=self.attempt_id))
            conn.execute(update(s.pipelines).where(self._pipeline_where(pipeline_id)).values(
                rows_written=s.pipelines.c.rows_written + rows, last_batch_id=batch_id, idle=False,
                **_completed(checkpoint_id, now, duration_ms, rows)))
            self._clear_stale(conn)
            self._clear_hung(conn)
        self.first_commit.set()
        return checkpoint_id

    @_step
    def checkpoint_failed(self, pipeline_id: int, batch_id: int, seconds: float, fingerprint: str) -> None:
        """A micro-batch ran past checkpoint.timeout: count a failed checkpoint (it may still commit later)."""
        with self._tx() as conn:
            newest = conn.execute(select(func.max(s.checkpoints.c.checkpoint_id)).where(
                s.checkpoints.c.job_id == self.job_id)).scalar() or 0
            conn.execute(insert(s.checkpoints).values(
                job_id=self.job_id, incarnation=self.incarnation, checkpoint_id=newest + 1,
                pipeline_id=pipeline_id, batch_id=batch_id, kind="CHECKPOINT", status="FAILED",
                created_at=store_now(conn), duration_ms=int(seconds * 1000), rows=0, source_offsets=None,
                fingerprint=fingerprint, attempt_id=self.attempt_id))
            conn.execute(update(s.pipelines).where(self._pipeline_where(pipeline_id)).values(
                checkpoints_failed=s.pipelines.c.checkpoints_failed + 1))
            record_event(conn, "CHECKPOINT_TIMED_OUT", self.actor, self.job_id, self.incarnation,
                         pipeline=pipeline_id, batch=batch_id, seconds=round(seconds, 1))


def _completed(checkpoint_id: int, created_at: float, duration_ms: int, rows: int) -> dict:
    """The pipeline row's totals after one more COMPLETED checkpoint (store/schema.py)."""
    p = s.pipelines.c
    return dict(checkpoints_completed=p.checkpoints_completed + 1, last_checkpoint_id=checkpoint_id,
                last_checkpoint_at=created_at, last_checkpoint_duration_ms=duration_ms, last_checkpoint_rows=rows)
