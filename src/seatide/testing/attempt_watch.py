"""The leader's watch over an in-process attempt: a hang fails the run, loudly.

In a cluster nothing holds a job silently: the leader gives up on a driver that heartbeats but
makes no progress (``job.progress-timeout``), does not stop within ``--cancel-grace`` of a cancel,
or stops heartbeating (``coordinator/reconcile.py``: the attempt is LOST), and its worker kills the
process. The in-process harness runs the driver's ``run_attempt`` on a thread of the test's own
process, and ticked its leader only between attempts: a Spark write that never ended held a test
for 900 s with nothing said. ``AttemptWatch`` ticks the leader while the attempt runs, as a
coordinator's loop does. Once the leader has given the attempt up, its driver has a few seconds to
end by itself (its heartbeat finds it fenced); if it does not, which is when a worker would kill
it, the watch cancels the session's Spark jobs (the nearest to a kill it has), writes the JVM's
threads to a file and fails the run with the leader's reason and where the driver's Python
threads were.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
import traceback

from sqlalchemy import select

from seatide.store import schema as s
from seatide.store.states import AttemptState

log = logging.getLogger(__name__)

# A LOST attempt's driver hears it at its next heartbeat (0.5 s in process) and ends its work:
# past this, a worker would have killed it.
KILL_AFTER_S = 15.0


class AttemptHung(AssertionError):
    """The leader gave the attempt up and its driver, in the test's own process, did not end."""


class AttemptWatch:
    def __init__(self, tick, store, job_id: str, attempt_id: int, data_dir: str):
        self.tick, self.store = tick, store
        self.job_id, self.attempt_id, self.data_dir = job_id, attempt_id, data_dir

    def lost(self) -> str | None:
        """The leader's reason, once it has given the attempt up (after a tick of its own)."""
        try:
            self.tick()
        except Exception:   # noqa: BLE001 - a slow or busy store: the leader's loop ticks again
            log.warning("in-process leader: a tick failed; the next one follows", exc_info=True)
        with self.store.read() as conn:
            row = conn.execute(select(s.attempts.c.state, s.attempts.c.error)
                               .where(s.attempts.c.attempt_id == self.attempt_id)).first()
        return (row.error or "attempt lost") if row is not None and row.state == AttemptState.LOST else None

    def run(self, call, name: str, interval: float = 0.5):
        """``call()`` on a thread named ``name``, the leader ticked every ``interval`` s until it returns."""
        outcome: dict = {}

        def attempt() -> None:
            try:
                outcome["code"] = call()
            except BaseException as exc:   # noqa: BLE001 - raised again on the caller's thread
                outcome["error"] = exc

        thread = threading.Thread(target=attempt, name=name, daemon=True)   # a new JVM thread too
        thread.start()
        reason, since = None, 0.0
        while thread.is_alive():
            thread.join(interval)
            if not thread.is_alive():
                break
            if reason is None:
                reason, since = self.lost(), time.monotonic()
            elif time.monotonic() - since > KILL_AFTER_S:
                raise AttemptHung(self._hung(reason, thread))
        if "error" in outcome:
            raise outcome["error"]
        return outcome["code"]

    def _hung(self, reason: str, thread: threading.Thread) -> str:
        stacks = driver_stacks(thread)
        jvm = self._jvm_threads()
        _cancel_spark_jobs()
        return (f"job {self.job_id}, attempt {self.attempt_id}: the leader gave it up ({reason}) and its driver "
                f"did not end within {KILL_AFTER_S:g} s; a worker would kill it, in process the run fails here."
                f"\nJVM threads: {jvm}\n"
                f"The driver's threads:\n{stacks}")

    def _jvm_threads(self) -> str:
        """The session JVM's thread dump in a file beside the job's data (``jcmd``, bounded)."""
        from pyspark import SparkContext

        gateway = SparkContext._gateway
        if gateway is None or getattr(gateway, "proc", None) is None:
            return "no JVM of this process"
        path = os.path.join(self.data_dir, f"jvm-threads-attempt-{self.attempt_id}.txt")
        try:
            with open(path, "w") as out:
                subprocess.run(["jcmd", str(gateway.proc.pid), "Thread.print"], stdout=out,
                               stderr=subprocess.STDOUT, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"not taken ({exc})"
        return path


def driver_stacks(thread: threading.Thread) -> str:
    """The attempt's thread and every other thread in SeaTide's code (a foreachBatch callback,
    a pipeline's stop), innermost frames last."""
    frames = sys._current_frames()
    names = {t.ident: t.name for t in threading.enumerate()}
    out = []
    for ident, frame in frames.items():
        stack = traceback.extract_stack(frame)
        if ident != thread.ident and not any("seatide" in f.filename and "attempt_watch" not in f.filename
                                             for f in stack):
            continue
        if ident == threading.get_ident():
            continue
        lines = "".join(traceback.format_list([f for f in stack if not f.filename.endswith("threading.py")][-12:]))
        out.append(f"--- thread {names.get(ident, ident)}\n{lines}")
    return "".join(out)


def _cancel_spark_jobs() -> None:
    """Cancel the session's running Spark jobs, without waiting on a JVM that may not answer."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is not None:
        threading.Thread(target=context.cancelAllJobs, name="cancel-hung-attempt", daemon=True).start()


__all__ = ["AttemptHung", "AttemptWatch", "driver_stacks"]
