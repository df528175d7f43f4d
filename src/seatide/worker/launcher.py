"""Starting a driver process: it dies with its worker, and its output reaches its log."""

from __future__ import annotations

import os
import subprocess

from seatide.runtime.parent_death import dying_with
from seatide.worker.driver_log import DriverLog


class ProcessLauncher:
    """Starts driver processes. The deterministic simulation passes its own, a simulated
    process table whose objects answer ``pid``, ``poll()``, ``kill()``, ``wait()`` and
    ``returncode`` as a ``subprocess.Popen`` does."""

    def start(self, command: list[str], log_file: DriverLog, env: dict[str, str], inherit_stdout: bool):
        """The driver's output (its JVM's too) reaches ``log_file`` through a pipe, masked;
        ``inherit_stdout`` leaves its stdout on this process's (``seatide run``'s terminal)."""
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                stdout=None if inherit_stdout else subprocess.PIPE,
                                stderr=subprocess.PIPE if inherit_stdout else subprocess.STDOUT,
                                preexec_fn=dying_with(os.getpid()), env=env)
        log_file.copy(proc.stderr if inherit_stdout else proc.stdout, name=f"driver-{proc.pid}-log")
        return proc
