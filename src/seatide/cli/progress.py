"""The live progress line of a running job: rows read and written, rows/s, checkpoints.

On a terminal it redraws one line in place (stderr, so stdout stays the job's output);
elsewhere it prints a line when the status changes and at most every five seconds.
"""

from __future__ import annotations

import sys
import time


class ProgressDisplay:
    def __init__(self, job_id: str, source: str, stream=None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.job_id = job_id
        self.started = time.time()
        self._last_rows = (self.started, 0)
        self._rate = 0.0
        self._last_print = 0.0
        self._last_status = None
        self._drawn = False
        self.stream.write(f"Job {job_id} ({source}) submitted\n")

    def update(self, summary: dict) -> None:
        now = time.time()
        then, rows = self._last_rows
        if now - then >= 1.0:
            self._rate = max(0.0, (summary["rows_written"] - rows) / (now - then))
            self._last_rows = (now, summary["rows_written"])
        text = (f"[{now - self.started:6.1f}s] {summary['status']:<15} read {summary['rows_read']:>12,}  "
                f"written {summary['rows_written']:>12,}  {self._rate:>12,.0f} rows/s  "
                f"checkpoints {summary['checkpoints']}")
        if summary.get("attempt") and summary["attempt"] > 1:
            text += f"  attempt {summary['attempt']}"
        if self.tty:
            self.stream.write("\r\033[K" + text)
            self.stream.flush()
            self._drawn = True
        elif summary["status"] != self._last_status or now - self._last_print >= 5.0:
            self.stream.write(text + "\n")
            self._last_print = now
        self._last_status = summary["status"]

    def note(self, message: str) -> None:
        if self._drawn:
            self.stream.write("\n")
            self._drawn = False
        self.stream.write(message + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self._drawn = False
        self.stream.flush()
