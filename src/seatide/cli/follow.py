"""Waiting on a cluster job from a client: to its end, or until a requested stop took effect.

``seatide run`` follows its own embedded job on the store; a client of a cluster (REST or
a store) follows it through the same read model (``job-info``), shows the same progress
line and statistics, and exits by the job's result.
"""

from __future__ import annotations

import signal
import sys
import time
from datetime import datetime, timezone

from seatide.cli.args import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, CommandRefused
from seatide.store.states import JOB_TERMINAL, JobStatus

POLL_S = 0.5


def follow_job(client, job_id: str, source: str, *, cancel_on_interrupt: bool = True) -> int:
    """Show progress until the job ends: 0 FINISHED (or SAVEPOINT_DONE), 1 otherwise, 130 on Ctrl-C
    (which cancels the job unless ``cancel_on_interrupt`` is off, SeaTunnel's ``-cj false``)."""
    from seatide.cli.progress import ProgressDisplay
    from seatide.cli.run import print_statistics

    _warn_without_leader(client)
    display = ProgressDisplay(job_id, source)
    # Ctrl-C must reach us even when our parent ignored SIGINT (a script that started us in
    # the background: POSIX shells ignore it for `&` jobs, and Python then keeps it ignored).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        while True:
            summary = summary_of(client.call("GET", f"/job-info/{job_id}"))
            display.update(summary)
            if summary["status"] in JOB_TERMINAL:
                break
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        display.close()
        if cancel_on_interrupt:
            client.call("POST", "/stop-job", {"jobId": job_id})
            print(f"cancel requested for job {job_id}", file=sys.stderr)
        else:
            print(f"job {job_id} keeps running (-cj false)", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGINT, previous)
    display.close()
    print_statistics(summary)
    if summary["status"] in (JobStatus.FINISHED, JobStatus.SAVEPOINT_DONE):
        return EXIT_OK
    print(f"seatide: job {job_id} {summary['status']}" + (f": {summary['error']}" if summary["error"] else ""),
          file=sys.stderr)
    return EXIT_FAILED


def stop_jobs(client, job_ids: list[str], *, savepoint: bool, wait: bool, release: bool = False) -> int:
    """Cancel (or savepoint) each job, then wait until each has stopped: 0 if every one
    ended CANCELED (SAVEPOINT_DONE), 1 if any was refused or ended otherwise. ``release``:
    cancel and release (a job that ended already, FAILED say, is released as it is)."""
    wanted = {JobStatus.SAVEPOINT_DONE} if savepoint else {JobStatus.CANCELED}
    if release:
        wanted |= {JobStatus.FAILED, JobStatus.SAVEPOINT_DONE}
    asked, code = [], EXIT_OK
    for job_id in job_ids:      # one refusal does not keep the others running
        try:
            body = {"jobId": job_id, "isStopWithSavePoint": savepoint, **({"release": True} if release else {})}
            client.call("POST", "/stop-job", body)
            asked.append(job_id)
        except CommandRefused as exc:
            print(f"seatide: job {job_id}: {exc}", file=sys.stderr)
            code = EXIT_FAILED
    for job_id in asked:
        if not wait:
            print(f"{job_id} {'savepoint' if savepoint else 'cancel'} requested")
            continue
        status = _wait_terminal(client, job_id)
        print(f"{job_id} {status}")
        if status not in wanted:
            code = EXIT_FAILED
    return code


def _wait_terminal(client, job_id: str) -> str:
    while True:
        status = client.call("GET", f"/job-info/{job_id}")["jobStatus"]
        if status in JOB_TERMINAL:
            return status
        time.sleep(POLL_S)


def job_metrics(info: dict) -> dict:
    """A job's counters under SeaTunnel's metric names, with SeaTide's per-pipeline and checkpoint figures."""
    return {"jobId": info["jobId"], "jobStatus": info["jobStatus"], **info["metrics"],
            "pipelines": [{k: p[k] for k in ("pipelineId", "status", "rowsRead", "rowsWritten", "lastBatchId")}
                          for p in info["pipelines"]],
            "checkpoint": info["checkpoint"]}


def summary_of(info: dict) -> dict:
    """``job-info`` in the shape ``ProgressDisplay`` and ``print_statistics`` read."""
    attempt = info["currentAttempt"]
    return {"job_id": info["jobId"], "name": info["jobName"], "status": info["jobStatus"],
            "error": info["errorMsg"], "created_at": _epoch(info["createTime"]),
            "finished_at": _epoch(info["finishedTime"]),
            "rows_read": info["metrics"]["SourceReceivedCount"], "rows_written": info["metrics"]["SinkWriteCount"],
            "checkpoints": info["checkpoint"]["completed"], "attempt": attempt["number"] if attempt else None,
            "retries": info["retriesUsed"]}


def _epoch(text: str | None) -> float | None:
    """The read model's UTC times (``store.views.iso``) back to seconds."""
    if text is None:
        return None
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()


def _warn_without_leader(client) -> None:
    """A job recorded where no coordinator leads waits until one starts: say so, don't just hang."""
    if client.call("GET", "/overview").get("leader") is None:
        print("seatide: warning: no coordinator leads this cluster now; the job waits until one starts",
              file=sys.stderr)
