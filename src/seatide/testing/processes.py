"""Simulated processes around the real control-plane code: a store each process can be cut
off from, a process table the worker launches into, and a driver that makes the real
driver's reports (``AttemptReporter``, ``Heartbeat``) one step at a time.

A simulated driver does what ``runtime.driver`` does, minus Spark: it marks its attempt
RUNNING, heartbeats (and fences itself when it cannot), starts each unfinished pipeline
(restoring from its checkpoint directory), commits micro-batches through an exactly-once
sink with the real protocol of ``runtime.commit_log`` (the decision is the fenced store write
``AttemptReporter.decide_batch``; the publish comes after it and, with ``split_commit``,
after other processes have run; a decided batch is rolled forward by whoever finds it, at
pipeline start or on replay), then records the batch, ends a BATCH pipeline's source after a
few batches, obeys cancel and savepoint, and reports its end.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable

from seatide.runtime.commit_log import read_json, write_json_atomic
from seatide.runtime.driver import _prepare_checkpoint as prepare_checkpoint, fresh_began
from seatide.runtime.heartbeat import FENCED_EXIT_CODE, Heartbeat
from seatide.runtime.reporter import AttemptReporter
from seatide.runtime.spark_checkpoint import last_committed_batch, restore_point
from seatide.store.db import AttemptFenced
from seatide.store.jobs import job_view
from seatide.store.restore import savepoint_dir
from seatide.store.states import PIPELINE_TERMINAL
from seatide.testing.sim_machine import ProcessStore, SimProcess, StorePartitioned

BATCHES_PER_BOUNDED_PIPELINE = 4
SINK = "sim"        # the plugin id of every simulated pipeline's one sink


@dataclass
class Ledger:
    """What the simulated sinks published: (lineage, pipeline, batch) -> attempts that published it,
    which run of which job each belongs to, and what save modes removed since."""
    published: dict[tuple[str, int, int], list[int]] = field(default_factory=dict)
    runs: dict[tuple[str, int, int], tuple[str, str]] = field(default_factory=dict)     # -> (job, run)
    removed: set[tuple[str, int, int]] = field(default_factory=set)

    def publish(self, lineage: str, pipeline_id: int, batch_id: int, attempt_id: int,
                run: tuple[str, str] = ("", "")) -> None:
        key = (lineage, pipeline_id, batch_id)
        self.published.setdefault(key, []).append(attempt_id)
        self.runs.setdefault(key, run)
        self.removed.discard(key)

    def output_of(self, job_id: str, pipeline_id: int) -> list[list]:
        """What a save mode of the job's pipeline would find in its output now (JSON-able keys)."""
        return sorted([*key] for key, (job, _) in self.runs.items()
                      if job == job_id and key[1] == pipeline_id and key not in self.removed)


@dataclass
class Pipe:
    pipeline_id: int
    dir: str
    lineage: str
    source: str                  # plugin id of its source
    next_batch: int


class SimDriver:
    """One attempt's driver; ``step`` makes its next report. ``world`` supplies the store view,
    the ledger, the check made before a publish and how a report is remembered for replay."""

    def __init__(self, world, proc: SimProcess, store: ProcessStore, job_id: str, attempt_id: int):
        self.world, self.proc, self.store = world, proc, store
        self.job_id, self.attempt_id = job_id, attempt_id
        self.reporter: AttemptReporter | None = None
        self.heartbeat: Heartbeat | None = None
        self.bounded = True
        self.pipes: list[Pipe] = []
        self.to_start: list[Pipe] = []
        self.unpublished: tuple[Pipe, int] | None = None   # decided, not yet published (split commit)
        self.uncommitted: tuple[Pipe, int] | None = None   # published, not yet recorded in the store
        self.stopping: list[Pipe] | None = None
        self.savepoint_taken = False
        self.save_modes_due: Pipe | None = None     # a pipeline whose sink makes its save modes next
        self.hung: set[int] = set()     # pipelines whose sink hangs: they never commit again
        self.exit_code: int | None = None
        self.last_beat = 0.0

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None

    def hang_pipeline(self, roll: float) -> str:
        """One of this driver's running pipelines hangs in its sink; the others go on (issue 30,
        finding 10: the leader must still see it stale)."""
        if not self.pipes:
            return "no running pipeline"
        pipe = self.pipes[int(roll * len(self.pipes)) % len(self.pipes)]
        self.hung.add(pipe.pipeline_id)
        return f"pipeline {pipe.pipeline_id}'s sink hangs"

    def exit(self, code: int) -> None:
        self.exit_code = code if self.exit_code is None else self.exit_code

    def step(self, roll: float, now: float) -> str:
        if self.exit_code is not None:
            self.proc.returncode = self.exit_code
            return f"exits {self.exit_code}"
        try:
            if self.reporter is None:
                return self._start(now)
            if now - self.last_beat >= 1.0:
                # The heartbeat is its own thread: when one is due, either may go first.
                if roll < 0.5:
                    self.last_beat = now
                    self.heartbeat.beat()
                    return f"heartbeat -> {self.heartbeat.desired}"
                roll = (roll - 0.5) * 2
            return self._next(roll)
        except AttemptFenced as exc:
            self.exit(FENCED_EXIT_CODE)
            return f"fenced: {exc}"
        except StorePartitioned:
            # A report that cannot be written fails the query; its end cannot be recorded either.
            self.exit(1)
            return "store unreachable: fails"

    # -- start-up ------------------------------------------------------------------------
    def _start(self, now: float) -> str:
        from seatide.config.loader import load_job_text
        from seatide.plan.dag import build_plan

        with self.store.read() as conn:
            view = job_view(conn, self.job_id)
        if view is None:
            self.exit(FENCED_EXIT_CODE)
            return "job gone"
        job = view.job
        self.reporter = AttemptReporter(self.store, self.job_id, job.incarnation, self.attempt_id)
        self.reporter.mark_running(self.proc.pid)
        self.heartbeat = Heartbeat(self.reporter, 1.0, 10.0, on_fenced=lambda: self.exit(FENCED_EXIT_CODE))
        self.heartbeat.beat()
        self.last_beat = now
        self.bounded = job.mode == "BATCH"
        self.incarnation = job.incarnation
        self.run_id = job.run_id
        self.prepare = json.loads(job.restore or "{}").get("prepare", {})   # what a resume left to do
        self.began = fresh_began(json.loads(job.restore or "{}"))
        plan = build_plan(load_job_text(job.config, json.loads(job.variables), source_name=job.job_id))
        for row in view.pipelines:
            if row.status not in PIPELINE_TERMINAL:
                source = plan.pipeline(row.pipeline_id).sources[0].plugin_id
                self.to_start.append(Pipe(row.pipeline_id, row.checkpoint_dir, "", source, 0))
        return f"running (attempt {self.attempt_id}, incarnation {job.incarnation})"

    def _start_pipeline(self, pipe: Pipe) -> str:
        if str(pipe.pipeline_id) in self.prepare:     # the real driver's step: a savepoint copied into place
            row = SimpleNamespace(pipeline_id=pipe.pipeline_id, checkpoint_dir=pipe.dir)
            prepare_checkpoint(self.reporter, row, self.incarnation, self.prepare[str(pipe.pipeline_id)],
                               self.began.get(pipe.pipeline_id))
        if self.save_modes_due is None:
            self.save_modes_due = pipe       # before its first batch: its sink's save modes
        meta_path = os.path.join(pipe.dir, "seatide.json")
        meta = read_json(meta_path)
        if meta is None:
            meta = {"lineage": self.world.new_lineage(self.job_id), "fingerprint": self._fingerprint(pipe)}
            write_json_atomic(meta_path, meta)
        pipe.lineage = meta["lineage"]
        spark_dir = os.path.join(pipe.dir, "spark")
        restored = restore_point(spark_dir, self.reporter.recorded_batch(pipe.pipeline_id))   # as the real driver
        if restored is not None:
            self.reporter.pipeline_restored(pipe.pipeline_id, restored)
        last = last_committed_batch(spark_dir)
        if last is not None:
            pipe.next_batch = last + 1
        self.reporter.pipeline_status(pipe.pipeline_id, "RUNNING")
        # As runtime.commit_log.roll_forward at a real pipeline's start.
        rolled = [self._publish(pipe, batch, record=False)
                  for batch, _, _ in self.reporter.unpublished_manifests(pipe.pipeline_id, SINK, f"{pipe.lineage}:")]
        self.to_start.remove(pipe)
        self.pipes.append(pipe)
        return f"pipeline {pipe.pipeline_id} RUNNING from batch {pipe.next_batch}" + "".join(
            f"; {r}" for r in rolled)

    def _fingerprint(self, pipe: Pipe) -> str:
        with self.store.read() as conn:
            return next(p.fingerprint for p in job_view(conn, self.job_id).pipelines
                        if p.pipeline_id == pipe.pipeline_id)

    # -- one report at a time ------------------------------------------------------------
    def _next(self, roll: float) -> str:
        if self.save_modes_due is not None and self.save_modes_due.next_batch == 0:
            return self._save_modes(self.save_modes_due)
        self.save_modes_due = None
        if self.to_start:
            return self._start_pipeline(self.to_start[0])
        if self.unpublished is not None:
            return self._publish(*self.unpublished)
        if self.uncommitted is not None:
            return self._record_batch(*self.uncommitted)
        desired = self.heartbeat.desired
        if desired in ("CANCEL", "SAVEPOINT") or self.stopping is not None:
            return self._stop(desired)
        if not self.pipes:
            self.reporter.end_attempt(succeeded=True)
            self.exit(0)
            return "every pipeline ended: attempt SUCCEEDED"
        # A driver whose sink hangs fails nothing by itself: only the leader's verdict ends it.
        if roll < 0.015 and not self.hung:
            self.reporter.end_attempt(succeeded=False, error="simulated task failure")
            self.exit(1)
            return "task failure: attempt FAILED"
        pipe = self.pipes[int(roll * len(self.pipes)) % len(self.pipes)]
        if pipe.pipeline_id in self.hung:
            return f"pipeline {pipe.pipeline_id}: its sink hangs"
        if self.bounded and pipe.next_batch >= BATCHES_PER_BOUNDED_PIPELINE:
            self.reporter.source_ended(pipe.pipeline_id, pipe.source)
            report = _bind(self.reporter.pipeline_status, pipe.pipeline_id, "FINISHED")
            report()
            self.world.remember(self, f"pipeline_status({pipe.pipeline_id}, FINISHED)", report)
            self.pipes.remove(pipe)
            return f"pipeline {pipe.pipeline_id} FINISHED"
        return self._commit(pipe, pipe.next_batch)

    def _commit(self, pipe: Pipe, batch: int) -> str:
        """One batch through the sink: skipped if published, rolled forward if decided, else decided."""
        if os.path.exists(self._commit_file(pipe, batch)):
            self.uncommitted = (pipe, batch)
            return f"pipeline {pipe.pipeline_id} batch {batch}: replayed, already published"
        if self.reporter.decided_manifest(pipe.pipeline_id, SINK, _transaction(pipe, batch)) is not None:
            return self._publish(pipe, batch) + " (rolled forward)"
        decided = self.reporter.decide_batch(pipe.pipeline_id, SINK, batch, _transaction(pipe, batch),
                                             {"publish": {}, "state": {"attempt": self.attempt_id}})
        self.world.after_decision(self.job_id, self.attempt_id, pipe.pipeline_id, batch)
        if self.world.split_commit:   # other processes may run before the publish
            self.unpublished = (pipe, batch)
            return f"pipeline {pipe.pipeline_id} batch {batch}: decided by attempt {decided['state']['attempt']}"
        return self._publish(pipe, batch)

    def _save_modes(self, pipe: Pipe) -> str:
        """A DROP_DATA before the pipeline's first batch, as the LocalFile sink makes it: decided
        once per run (fenced by the attempt) with the output it removes, which is all it removes.
        A zombie that comes back to it later must remove nothing of what its run has published."""
        self.save_modes_due = None
        key = f"S_{self.job_id}_{self.run_id}_{pipe.pipeline_id}"
        decided = self.reporter.decide_batch(pipe.pipeline_id, SINK, -1, key,
                                             {"remove": self.world.ledger.output_of(self.job_id, pipe.pipeline_id)})
        removed = [tuple(k) for k in decided["remove"]]
        self.world.remove_output(self.job_id, self.run_id, removed)
        return f"pipeline {pipe.pipeline_id}: save modes remove {len(removed)} batches of earlier runs"

    @staticmethod
    def _commit_file(pipe: Pipe, batch: int) -> str:
        return os.path.join(pipe.dir, "sinks", SINK, "commit", f"{batch}.json")

    def _publish(self, pipe: Pipe, batch: int, record: bool = True) -> str:
        """Publish a decided batch, idempotently (the commit file stands for its files in place);
        whoever publishes it, a zombie that decided in time or its replacement, it appears once."""
        self.unpublished = None
        if record:
            self.uncommitted = (pipe, batch)
        commit = self._commit_file(pipe, batch)
        outcome = "already published"
        if not os.path.exists(commit):
            decided = self.world.before_publish(self.job_id, pipe.pipeline_id, _transaction(pipe, batch))
            self.world.ledger.publish(pipe.lineage, pipe.pipeline_id, batch, decided, (self.job_id, self.run_id))
            write_json_atomic(commit, {"attempt": decided})
            outcome = f"published (decided by attempt {decided})"
        self.reporter.batch_published(pipe.pipeline_id, SINK, _transaction(pipe, batch))
        return f"pipeline {pipe.pipeline_id} batch {batch}: {outcome}"

    def _record_batch(self, pipe: Pipe, batch: int) -> str:
        report = _bind(self.reporter.batch_committed, pipe.pipeline_id, batch, 10, 5, {"batch": batch}, "fp")
        report()
        self.world.remember(self, f"batch_committed({pipe.pipeline_id}, {batch})", report)
        for log in ("offsets", "commits"):          # Spark's own log: the batch is done
            write_json_atomic(os.path.join(pipe.dir, "spark", log, str(batch)), {})
        self.uncommitted = None
        pipe.next_batch = batch + 1
        return f"pipeline {pipe.pipeline_id} batch {batch}: recorded"

    def _stop(self, desired: str) -> str:
        if self.stopping is None:
            self.stopping = list(self.pipes)
            self.savepoint = desired == "SAVEPOINT"
        if self.savepoint and not self.savepoint_taken:
            batches = {p.pipeline_id: p.next_batch - 1 for p in self.stopping}
            saved = self.reporter.savepoint(batches, self._copy)
            self.savepoint_taken = True
            return f"savepoint {saved} of {sorted(batches)}"
        if self.stopping:
            pipe = self.stopping.pop(0)
            status = "SAVEPOINT_DONE" if self.savepoint else "CANCELED"
            self.reporter.pipeline_status(pipe.pipeline_id, status)
            self.pipes.remove(pipe)
            return f"pipeline {pipe.pipeline_id} {status}"
        self.reporter.end_attempt(succeeded=True)
        self.exit(0)
        return "stopped on request: attempt SUCCEEDED"

    def _copy(self, savepoint_id: int) -> None:
        for pipe in self.stopping:
            target = savepoint_dir(pipe.dir, savepoint_id)
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(pipe.dir, target)


class SimLauncher:
    """The worker's launcher: a driver "process" in the simulated process table."""

    def __init__(self, world, worker_name: str):
        self.world, self.worker_name = world, worker_name

    def start(self, command: list[str], log_file, env: dict[str, str], inherit_stdout: bool) -> SimProcess:
        job_id = command[command.index("--job-id") + 1]
        attempt_id = int(command[command.index("--attempt") + 1])
        return self.world.start_driver(self.worker_name, job_id, attempt_id)


def _transaction(pipe: Pipe, batch: int) -> str:
    return f"{pipe.lineage}:{batch}"     # stable across replays of the batch, as the real driver's


def _bind(fn: Callable, *args) -> Callable[[], object]:
    return lambda: fn(*args)
