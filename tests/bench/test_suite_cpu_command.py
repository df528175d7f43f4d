"""bench/suite_cpu.py --by-test measures the suite's own drivers: its plugin must not change
how a driver runs Spark's Python processes (with its zygote, seatide/runtime/zygote_choice.py)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

from bench.suite_cpu import ROOT, pytest_command
from seatide.runtime import zygote_choice


def test_the_by_test_plugin_leaves_the_drivers_their_zygote():
    plain, plain_env = pytest_command(["tests/x.py"], None, environ={})
    command, env = pytest_command(["tests/x.py"], "/tmp/tests-dir", environ={})
    # A bench entry on PYTHONPATH reached every driver and turned its zygote off: drivers started
    # 122 cold Spark Python workers in a three-test run that the suite serves by forks.
    assert zygote_choice.own_python({}, env, cwd=ROOT) is None
    assert env.get("PYTHONPATH") == plain_env.get("PYTHONPATH")
    assert command == plain[:3] + ["-p", "bench.suite_cpu_tests"] + plain[3:]
    assert env["SEATIDE_CPU_TESTS_DIR"] == "/tmp/tests-dir"


def test_pytest_finds_the_plugin_from_the_project_root_alone():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run([sys.executable, "-c", "import importlib.util as u; "
                            "print(u.find_spec('bench.suite_cpu_tests').origin)"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == os.path.join(ROOT, "bench", "suite_cpu_tests.py")
    assert importlib.util.find_spec("bench.suite_cpu_tests") is not None
