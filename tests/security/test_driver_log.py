"""A driver's own output reaches its log file masked: print, stderr, and what its child
processes write (the JVM's log4j lines), not only its Python logging."""

from __future__ import annotations

import os
import sys

from seatide.worker.agent import ProcessLauncher
from seatide.worker.driver_log import DriverLog

PASSWORD = "S3cret-Jdbc-Pass-9"

# A stand-in for a driver: Python output, a child process writing to the inherited stderr
# (as the JVM does), and a last line without its newline.
DRIVER = f"""
import subprocess, sys
print('connect with password {PASSWORD} to postgres_cdc_table_1', flush=True)
subprocess.run(['sh', '-c', 'echo WARN url jdbc:postgresql://postgres:postgres@h/postgres as user postgres >&2'])
sys.stdout.write('the end {PASSWORD}')
"""


def _run(tmp_path, inherit_stdout: bool) -> str:
    log = DriverLog(str(tmp_path / "attempt-1.log"), {PASSWORD, "postgres"})
    proc = ProcessLauncher().start([sys.executable, "-c", DRIVER], log, dict(os.environ), inherit_stdout)
    assert proc.wait(timeout=60) == 0
    log.relay.join(timeout=60)           # ends when every holder of the pipe has closed it
    assert not log.relay.is_alive()
    return (tmp_path / "attempt-1.log").read_text()


def test_a_drivers_stdout_stderr_and_childrens_output_reach_its_log_masked(tmp_path):
    assert _run(tmp_path, inherit_stdout=False) == (
        "connect with password ****** to postgres_cdc_table_1\n"
        "WARN url jdbc:postgresql://postgres:******@h/postgres as user ******\n"
        "the end ******")


def test_with_stdout_on_the_terminal_stderr_still_reaches_the_log_masked(tmp_path, capfd):
    assert _run(tmp_path, inherit_stdout=True) == "WARN url jdbc:postgresql://postgres:******@h/postgres as user ******\n"
