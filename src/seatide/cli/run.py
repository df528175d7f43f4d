"""``seatide run``: local mode — an embedded coordinator and worker on the SQLite store.

The same code paths as a cluster: the job is submitted to the store, the embedded
coordinator (if it wins the lease) schedules it on the embedded worker, which launches
the driver process. The terminal shows live progress and, at the end, statistics.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from datetime import datetime

from seatide.cli.args import (EXIT_BAD_CONFIG, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, default_data_dir,
                              parse_variables, print_config_warnings, read_job_file)
from seatide.cli.progress import ProgressDisplay
from seatide.config.job_text import captured_environment
from seatide.store.states import JobStatus

# A wait for an older SeaTide's lease to expire (``LocalRun._elect_after_an_upgrade``) is said when it is this long;
# it is waited for only when it expires within LEASE_WAIT_MAX_S, and taken within LEASE_TAKEN_GRACE_S after.
WAIT_TOLD_AFTER_S = 1.0
LEASE_WAIT_MAX_S = 60.0
LEASE_TAKEN_GRACE_S = 5.0


def run_command(args) -> int:
    from seatide import intents

    text, variables = read_job_file(args.config), parse_variables(args.variables)
    try:   # before the data directory and its store are made: a bad job leaves nothing behind
        intents.check(text, variables, source=args.config, strict=args.strict)
    except intents.Refusal as exc:
        print(f"seatide: invalid job: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    data_dir = os.path.abspath(args.data_dir or default_data_dir())
    return LocalRun(data_dir).run(text, variables, source=args.config, job_id=args.job_id, name=args.job_name,
                                  strict=args.strict, environment=captured_environment(text, variables))


def resume_command(args) -> int:
    data_dir = os.path.abspath(args.data_dir or default_data_dir())
    text = read_job_file(args.config) if args.config else None
    variables = parse_variables(args.variables) if args.variables else None
    return LocalRun(data_dir).resume(
        args.job_id, text=text, variables=variables, source=args.config, strict=args.strict,
        savepoint_id=args.savepoint, fallback=args.fallback,
        environment=captured_environment(text, variables) if text else None)   # as client.resume_job


class LocalRun:
    def __init__(self, data_dir: str):
        from seatide.coordinator.service import Coordinator
        from seatide.store.address import default_store_url
        from seatide.store.db import open_store
        from seatide.store.liveness import liveness_for
        from seatide.timeouts import Timeouts
        from seatide.worker.agent import Worker

        timeouts = Timeouts().check()     # local mode runs with the defaults
        self.data_dir = data_dir
        self.store_url = default_store_url(data_dir)
        self.store = open_store(self.store_url)
        # Liveness locks, as a cluster's: a `seatide resume` after this process was killed sees
        # its worker dead by its free lock at once, not after worker_lost_after of silence.
        liveness = liveness_for(self.store, timeouts)
        self.worker = Worker(self.store, self.store_url, data_dir, slots=1, inherit_stdout=True, timeouts=timeouts,
                             liveness=liveness)
        self.coordinator = Coordinator(self.store, timeouts=timeouts, data_dir=data_dir, liveness=liveness)
        self.coordinator.on_effects = self.worker.wake
        self._worker_thread = threading.Thread(target=self.worker.run, name="worker", daemon=True)

    def run(self, text: str, variables: dict, *, source: str, job_id: str | None = None,
            name: str | None = None, strict: bool = False, environment: dict | None = None) -> int:
        from seatide import intents

        return self._start(lambda: intents.submit(
            self.store, self.data_dir, text=text, variables=variables, source=source, job_id=job_id,
            name=name, strict=strict, pinned_worker=self.worker.node_id, actor="seatide-run",
            paths_from=os.getcwd(), environment=environment), source)     # relative paths are recorded from here

    def resume(self, job_id: str, *, text: str | None, variables: dict | None, source: str | None,
               strict: bool = False, savepoint_id: int | None = None, fallback: str | None = None,
               environment: dict | None = None) -> int:
        from seatide import intents

        return self._start(lambda: intents.resume(
            self.store, job_id, text=text, variables=variables, source=source, strict=strict,
            savepoint_id=savepoint_id, fallback=fallback, pinned_worker=self.worker.node_id,
            actor="seatide-resume", paths_from=os.getcwd(), environment=environment), source or f"resume of {job_id}")

    def _start(self, record_job, source: str) -> int:
        from seatide.intents import LeaderAwaited, Refusal, RefusalKind

        try:
            waited = self._elect_after_an_upgrade()
            accepted = record_job()
        except LeaderAwaited as exc:
            print(older_lease_held(exc, self.data_dir, waited), file=sys.stderr)
            return EXIT_FAILED
        except Refusal as exc:
            self.coordinator.lease.resign()      # taken above: another's `seatide run` need not wait for it
            bad_config = exc.kind is RefusalKind.BAD_REQUEST
            print(f"seatide: {'invalid job: ' if bad_config else ''}{exc}", file=sys.stderr)
            return EXIT_BAD_CONFIG if bad_config else EXIT_FAILED
        print_config_warnings(accepted.warnings)
        self._worker_thread.start()
        self.coordinator.start()
        try:
            return self._follow(accepted.job_id, source)
        finally:
            self.worker.stop()
            self._worker_thread.join(timeout=30)
            self.coordinator.stop()

    def _elect_after_an_upgrade(self) -> float:
        """A data directory an older SeaTide ran in, upgraded past revision 0022 by this process: a marked job waits
        for a leader elected through the new lease table (intents.py), and the embedded coordinator is the one to be
        it. Taken once the copied lease expires (the older process that held it cannot renew it): waited for until
        that row's ``expires_at`` (the store's clock), saying so on stderr, if that is within ``LEASE_WAIT_MAX_S``;
        a lease that runs longer, or not taken by then, has the job refused saying why (``older_lease_held``),
        nothing recorded. Returns how long it waited."""
        from seatide import clock
        from seatide.store.clock import read_store_now
        from seatide.store.node_features import older_leader_may_act

        began = clock.monotonic()
        with self.store.read() as conn:
            lease, now = older_leader_may_act(conn), read_store_now(conn)
        if lease is None or self.coordinator.lease.tick():
            return 0.0
        left = lease.expires_at - now
        if left > LEASE_WAIT_MAX_S:
            return 0.0           # refused at once: intents say the lease holds, older_lease_held until when
        if left >= WAIT_TOLD_AFTER_S:
            print(f"seatide: waiting {left:.0f} s, until {_ts(lease.expires_at)} (the store's clock), for the leader "
                  f"lease that a SeaTide older than this one held on {self.data_dir} (coordinator {lease.node_id}) "
                  f"to expire: the job is recorded once this run's coordinator leads", file=sys.stderr)
        # The lease is taken by the store's clock once it passed expires_at: a moment's grace for the tick after it.
        while clock.monotonic() - began < max(left, 0.0) + LEASE_TAKEN_GRACE_S:
            time.sleep(0.1)
            if self.coordinator.lease.tick():
                break
        return clock.monotonic() - began

    def _follow(self, job_id: str, source: str) -> int:
        from seatide import intents
        from seatide.store.states import JOB_TERMINAL

        display = ProgressDisplay(job_id, source)
        interrupted = False
        original = signal.getsignal(signal.SIGINT)

        def on_interrupt(signum, frame):
            nonlocal interrupted
            if interrupted:              # a second Ctrl-C: leave now, the driver dies with us
                signal.signal(signal.SIGINT, original)
                raise KeyboardInterrupt
            interrupted = True
            display.note("stopping the job (Ctrl-C again to leave at once)...")
            try:
                intents.stop(self.store, job_id, actor="seatide-run")
            except intents.Refusal:      # it ended meanwhile: the loop below sees its end
                pass

        signal.signal(signal.SIGINT, on_interrupt)
        try:
            while True:
                summary = job_summary(self.store, job_id)
                display.update(summary)
                if summary["status"] in JOB_TERMINAL:
                    break
                time.sleep(0.2)
        except KeyboardInterrupt:
            display.close()
            print(resume_hint(job_id, self.data_dir), file=sys.stderr)
            return EXIT_INTERRUPTED
        finally:
            signal.signal(signal.SIGINT, original)
        display.close()
        print_statistics(summary)
        if summary["status"] == JobStatus.FAILED:
            print(f"seatide: job {job_id} FAILED: {summary['error']}", file=sys.stderr)
        if interrupted or summary["status"] == JobStatus.CANCELED:
            print(resume_hint(job_id, self.data_dir), file=sys.stderr)
            return EXIT_INTERRUPTED
        return EXIT_OK if summary["status"] in (JobStatus.FINISHED, JobStatus.SAVEPOINT_DONE) else EXIT_FAILED


def older_lease_held(exc, data_dir: str, waited: float) -> str:
    """Local mode's refusal while the lease copied from an older SeaTide holds (``intents.LeaderAwaited``)."""
    until = _ts(exc.lease.expires_at)
    waiting = (f"waited {waited:.0f} s for the lease to expire" if waited >= WAIT_TOLD_AFTER_S else
               f"this run waits for such a lease only when it expires within {LEASE_WAIT_MAX_S:.0f} s")
    return (f"seatide: the data directory {data_dir} was run by a SeaTide older than this one: its leader lease "
            f"(coordinator {exc.lease.node_id}, epoch {exc.lease.epoch}), moved when this run upgraded the store to "
            f"revision 0022, runs until {until}, and until then that older process, if it still runs, may act on "
            f"the store and would fill this job's ${{NAME}}s from its own environment. Nothing was {exc.what} "
            f"({waiting}). Stop every process of the older SeaTide using this data directory (its `seatide run`, "
            f"`seatide cluster coordinator`), then run this again after {until}")


def resume_hint(job_id: str, data_dir: str) -> str:
    return (f"Job {job_id} stopped; its checkpoints are kept. Resume it with:\n"
            f"  seatide resume {job_id} --data-dir {data_dir}")


def job_summary(store, job_id: str) -> dict:
    from sqlalchemy import and_, func, select

    from seatide.store import schema as s
    from seatide.store.event_masking import job_error, job_name
    from seatide.store.jobs import job_view

    with store.read() as conn:
        view = job_view(conn, job_id)
        job = view.job
        checkpoints = conn.execute(select(func.count(), func.max(s.checkpoints.c.checkpoint_id)).where(and_(
            s.checkpoints.c.job_id == job_id, s.checkpoints.c.incarnation == job.incarnation))).first()
    return {
        "job_id": job_id, "name": job_name(job), "status": job.status, "error": job_error(job),
        "created_at": job.created_at, "finished_at": job.finished_at,
        "rows_read": sum(p.rows_read for p in view.pipelines),
        "rows_written": sum(p.rows_written for p in view.pipelines),
        "pipelines": [(p.pipeline_id, p.status) for p in view.pipelines],
        "checkpoints": checkpoints[0] or 0, "last_checkpoint": checkpoints[1],
        "attempt": view.attempt.number if view.attempt is not None else None,
        "retries": job.retries_used,
    }


def print_statistics(summary: dict) -> None:
    end = summary["finished_at"] or time.time()
    rows = [
        ("Job Id", summary["job_id"]), ("Job Name", summary["name"]), ("Status", summary["status"]),
        ("Start Time", _ts(summary["created_at"])), ("End Time", _ts(end)),
        ("Total Time(s)", f"{end - summary['created_at']:.1f}"),
        ("Total Read Count", summary["rows_read"]), ("Total Write Count", summary["rows_written"]),
        ("Checkpoints", summary["checkpoints"]), ("Retries", summary["retries"]),
    ]
    line = "*" * 52
    print(line)
    print(f"{'Job Statistic Information':^52}")
    print(line)
    for key, value in rows:
        print(f"{key:<26}: {value}")
    print(line)


def _ts(value: float) -> str:
    return datetime.fromtimestamp(value).strftime("%Y-%m-%d %H:%M:%S")
