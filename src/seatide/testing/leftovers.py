"""A pytest plugin: nothing a test run started may outlive it.

The process that runs the session (pytest-xdist's controller, or the only pytest process)
marks itself with a variable of its own (``RUN_VAR``) before any test runs. Every process the
run starts inherits it, its xdist workers, their drivers, JVMs, zygotes and private database
servers included, and keeps it in ``/proc/PID/environ`` even after it is re-parented to init.
At the very end of the session, after every worker has torn down its session fixtures (the
shared SparkSession, the private servers) and exited, the controller waits a little for what
is still on its way out, then names every process with its mark that is still alive, with
the test that was running when it was started, kills it and fails the run.

A run started inside a test (a nested pytest) makes a mark of its own: it checks its
processes, and its processes are also the outer run's.
"""

from __future__ import annotations

import os
import time

import psutil
import pytest

RUN_VAR = "SEATIDE_TEST_RUN"
# How long processes may take to exit after the session ends (a JVM whose driver was killed
# exits when it reads the end of its stdin). Seconds; tests of this plugin shorten it.
GRACE_VAR = "SEATIDE_TEST_LEFTOVER_GRACE"
DEFAULT_GRACE_S = 60.0
_LEFT = pytest.StashKey[list]()


def _mark() -> bytes:
    return f"{RUN_VAR}={os.environ[RUN_VAR]}".encode()


def _environ(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return handle.read().split(b"\0")
    except OSError:
        return []


def run_processes() -> list[psutil.Process]:
    """Live processes (not zombies) started by this run, this process excepted."""
    mark, found = _mark(), []
    for process in psutil.process_iter():
        if process.pid == os.getpid() or mark not in _environ(process.pid):
            continue
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.NoSuchProcess:
            pass
    return found


def describe(process: psutil.Process) -> str:
    """pid, age, the test that was running when it started, and its command line."""
    variables = dict(entry.split(b"=", 1) for entry in _environ(process.pid) if b"=" in entry)
    test = variables.get(b"PYTEST_CURRENT_TEST", b"outside any test").decode(errors="replace")
    worker = variables.get(b"PYTEST_XDIST_WORKER", b"").decode()
    try:
        age = time.time() - process.create_time()
        command = " ".join(process.cmdline())
    except psutil.Error:
        return f"pid {process.pid} (gone while being described)"
    if len(command) > 240:
        command = command[:240] + "..."
    return (f"pid {process.pid}, up {age:.0f} s, started during {test.rsplit(' (', 1)[0]}"
            f"{f' [{worker}]' if worker else ''}: {command}")


def outliving(grace: float) -> list[psutil.Process]:
    """The run's processes still alive after ``grace`` seconds (fewer if they all go sooner)."""
    deadline = time.monotonic() + grace
    while True:
        left = run_processes()
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.2)


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    if not _is_xdist_worker(config):        # workers inherit their controller's mark
        os.environ[RUN_VAR] = f"{os.getpid()}-{os.urandom(4).hex()}"


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_sessionfinish(session: pytest.Session):
    # After the yield: every other implementation has run, pytest's own teardown of the
    # session fixtures and xdist's shutdown of its workers included.
    yield
    if _is_xdist_worker(session.config):
        return
    left = outliving(float(os.environ.get(GRACE_VAR, DEFAULT_GRACE_S)))
    if not left:
        return
    session.config.stash[_LEFT] = [describe(process) for process in left]
    for process in left:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    left = config.stash.get(_LEFT, [])
    if left:
        terminalreporter.section("processes that outlived the test run", sep="=", red=True, bold=True)
        terminalreporter.write_line(f"{len(left)} process(es) started by this run were still alive after it "
                                    f"ended (now killed); whatever starts them must stop them:")
        for line in left:
            terminalreporter.write_line("  " + line)
