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

from seatide.cli.main import (EXIT_BAD_CONFIG, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, default_data_dir,
                              parse_variables, print_config_warnings)
from seatide.cli.progress import ProgressDisplay


def run_command(args) -> int:
    from seatide.config.loader import ConfigError, load_job_file

    variables = parse_variables(args.variables)
    try:
        config = load_job_file(args.config, variables, strict=args.strict)
    except ConfigError as exc:
        print(f"seatide: invalid job: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    print_config_warnings(config.warnings)
    with open(args.config, encoding="utf-8") as handle:
        text = handle.read()
    data_dir = os.path.abspath(args.data_dir or default_data_dir())
    return LocalRun(data_dir).run(text, variables, config, job_id=args.job_id, source=args.config)


def resume_command(args) -> int:
    import json

    from seatide.config.loader import ConfigError, load_job_text
    from seatide.store.jobs import load_job

    data_dir = os.path.abspath(args.data_dir or default_data_dir())
    local = LocalRun(data_dir)
    with local.store.read() as conn:
        job = load_job(conn, args.job_id)
    if job is None:
        print(f"seatide: no job with id {args.job_id} in {data_dir}", file=sys.stderr)
        return EXIT_FAILED
    variables = parse_variables(args.variables) if args.variables else json.loads(job.variables)
    try:
        if args.config:
            with open(args.config, encoding="utf-8") as handle:
                text = handle.read()
        else:
            text = job.config
        config = load_job_text(text, variables, source_name=args.config or f"job {args.job_id}",
                               strict=args.strict)
    except OSError as exc:
        print(f"seatide: {args.config}: cannot read the job file: {exc.strerror}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    except ConfigError as exc:
        print(f"seatide: invalid job: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    print_config_warnings(config.warnings)
    return local.resume(args.job_id, text, variables, config, args.savepoint, args.fallback)


class LocalRun:
    def __init__(self, data_dir: str):
        from seatide.coordinator.service import Coordinator
        from seatide.store.db import default_store_url, open_store
        from seatide.worker.agent import Worker

        self.data_dir = data_dir
        self.store_url = default_store_url(data_dir)
        self.store = open_store(self.store_url)
        self.worker = Worker(self.store, self.store_url, data_dir, slots=1, inherit_stdout=True)
        self.coordinator = Coordinator(self.store)
        self.coordinator.on_effects = self.worker.wake
        self._worker_thread = threading.Thread(target=self.worker.run, name="worker", daemon=True)

    def run(self, text: str, variables: dict, config, job_id: str | None, source: str) -> int:
        from seatide.plan.dag import build_plan
        from seatide.store.jobs import submit_job

        return self._start(lambda: submit_job(
            self.store, text=text, variables=variables, config=config, plan=build_plan(config),
            data_dir=self.data_dir, job_id=job_id, pinned_worker=self.worker.node_id, actor="seatide-run"), source)

    def resume(self, job_id: str, text: str, variables: dict, config, savepoint_id: int | None,
               fallback: str | None) -> int:
        from seatide.plan.dag import build_plan
        from seatide.store.restore import resume_job

        return self._start(lambda: resume_job(
            self.store, job_id, plan=build_plan(config), text=text, variables=variables, savepoint_id=savepoint_id,
            fallback=fallback, pinned_worker=self.worker.node_id, actor="seatide-resume"), f"resume of {job_id}")

    def _start(self, record_job, source: str) -> int:
        from seatide.store.jobs import JobRefused

        try:
            job_id = record_job()
        except JobRefused as exc:
            print(f"seatide: {exc}", file=sys.stderr)
            return EXIT_FAILED
        self._worker_thread.start()
        self.coordinator.start()
        try:
            return self._follow(job_id, source)
        finally:
            self.worker.stop()
            self._worker_thread.join(timeout=30)
            self.coordinator.stop()

    def _follow(self, job_id: str, source: str) -> int:
        from seatide.store.jobs import request_stop
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
            request_stop(self.store, job_id, savepoint=False, actor="seatide-run")

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
        if summary["status"] == "FAILED":
            print(f"seatide: job {job_id} FAILED: {summary['error']}", file=sys.stderr)
        if interrupted or summary["status"] == "CANCELED":
            print(resume_hint(job_id, self.data_dir), file=sys.stderr)
            return EXIT_INTERRUPTED
        return EXIT_OK if summary["status"] in ("FINISHED", "SAVEPOINT_DONE") else EXIT_FAILED


def resume_hint(job_id: str, data_dir: str) -> str:
    return (f"Job {job_id} stopped; its checkpoints are kept. Resume it with:\n"
            f"  seatide resume {job_id} --data-dir {data_dir}")


def job_summary(store, job_id: str) -> dict:
    from sqlalchemy import and_, func, select

    from seatide.store import schema as s
    from seatide.store.jobs import job_view

    with store.read() as conn:
        view = job_view(conn, job_id)
        job = view.job
        checkpoints = conn.execute(select(func.count(), func.max(s.checkpoints.c.checkpoint_id)).where(and_(
            s.checkpoints.c.job_id == job_id, s.checkpoints.c.incarnation == job.incarnation))).first()
    return {
        "job_id": job_id, "name": job.name, "status": job.status, "error": job.error_msg,
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
