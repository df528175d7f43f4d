"""A pytest plugin of bench/suite_cpu.py's ``--by-test``: each pytest process writes the test it runs to a file
named by its PID in $SEATIDE_CPU_TESTS_DIR, so the sampler can charge every process's CPU to the test its pytest
ancestor was running (a module's shared cluster counts to the test that was running when it used the CPU)."""

from __future__ import annotations

import os

_DIR = os.environ.get("SEATIDE_CPU_TESTS_DIR")


def _running(text: str) -> None:
    if _DIR:
        with open(os.path.join(_DIR, str(os.getpid())), "w") as handle:
            handle.write(text)


def pytest_runtest_logstart(nodeid, location):
    _running(nodeid)


def pytest_runtest_logfinish(nodeid, location):
    _running("(between tests)")
