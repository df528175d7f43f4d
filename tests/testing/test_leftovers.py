"""The session-end check (seatide.testing.leftovers) on a real pytest run of its own, one
process and two (pytest-xdist): a process a test leaves behind fails the run and is named and
killed; what a session fixture shares until the end and then stops is not flagged, nor are
the xdist workers themselves."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from seatide.testing.leftovers import RUN_VAR
from tests.inner_pytest import inner_pytest

# A test that starts a process and forgets it, and another whose session fixture starts one,
# shares it across the run and stops it at the session's end.
TESTS = """
import os, subprocess, sys
import pytest

BLOCK = [sys.executable, "-c", "import sys; sys.stdin.read()"]     # lives until its stdin ends

@pytest.fixture(scope="session")
def shared():
    process = subprocess.Popen(BLOCK, stdin=subprocess.PIPE)
    yield process
    process.stdin.close()
    process.wait(timeout=60)

def test_uses_the_shared_process(shared):
    assert shared.poll() is None

def test_forgets_its_process(tmp_path):
    {leak}
"""
LEAK = ("process = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)']); "
        "open(os.environ['LEAKED_PID_FILE'], 'w').write(str(process.pid))")


def _run(tmp_path, processes: int) -> tuple[subprocess.CompletedProcess, int | None]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "test_inner.py").write_text(TESTS.format(leak=LEAK))
    command, env = inner_pytest("seatide.testing.leftovers")
    env["SEATIDE_TEST_LEFTOVER_GRACE"] = "2"
    env["LEAKED_PID_FILE"] = str(tmp_path / "leaked.pid")
    run = subprocess.run([*command, "-n", str(processes), "--basetemp", str(tmp_path / "basetemp"), "test_inner.py"],
                         cwd=project, env=env, capture_output=True, text=True, timeout=300)
    pid_file = tmp_path / "leaked.pid"
    return run, int(pid_file.read_text()) if pid_file.exists() else None


@pytest.mark.parametrize("processes", [0, 2])
def test_a_process_left_behind_fails_the_run_and_is_named_and_killed(tmp_path, processes):
    run, leaked = _run(tmp_path, processes=processes)
    assert leaked is not None, run.stdout + run.stderr
    try:
        assert run.returncode == 1, run.stdout + run.stderr
        assert "2 passed" in run.stdout, run.stdout
        assert "processes that outlived the test run" in run.stdout, run.stdout
        named = [line for line in run.stdout.splitlines() if line.startswith("  pid ")]
        assert len(named) == 1, run.stdout            # the shared fixture's process is not named
        assert f"pid {leaked}," in named[0] and "test_inner.py::test_forgets_its_process" in named[0], run.stdout
        assert not psutil.pid_exists(leaked) or psutil.Process(leaked).status() == psutil.STATUS_ZOMBIE
    finally:
        if psutil.pid_exists(leaked):
            psutil.Process(leaked).kill()


def test_this_run_is_marked():
    assert os.environ.get(RUN_VAR)
