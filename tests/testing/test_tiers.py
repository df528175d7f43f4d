"""The fast tier's guard (seatide.testing.tiers): an unmarked test that starts a SeaTide
driver, coordinator, worker or local run fails; a soak test is a cluster test too."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from seatide.testing.cluster import SEATIDE
from seatide.testing.tiers import cluster_command
from seatide.worker.warm_pool import warm_command
from tests.inner_pytest import inner_pytest

TESTS = """
import subprocess, sys
import pytest

# The driver's module, asked for its usage: it prints it and exits 0.
DRIVER = [sys.executable, "-m", "seatide.runtime.driver", "--help"]
# With a flag it does not know: it refuses to start (exit 2).
REFUSED = [sys.executable, "-m", "seatide.runtime.driver", "--no-such-flag"]

def test_unmarked_starts_a_driver():
    subprocess.run(DRIVER, check=True, capture_output=True)

@pytest.mark.cluster
def test_marked_starts_a_driver():
    subprocess.run(DRIVER, check=True, capture_output=True)

def test_unmarked_starts_another_process():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_unmarked_sees_a_driver_refuse_to_start():
    assert subprocess.run(REFUSED, capture_output=True).returncode == 2

@pytest.mark.soak
def test_a_long_run():
    pass
"""


def _run(tmp_path, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    cluster: real processes\n    soak: long\n")
    (tmp_path / "test_inner.py").write_text(TESTS)
    command, env = inner_pytest("seatide.testing.tiers")
    return subprocess.run([*command, "-n", "0", "-rA", *args, "test_inner.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_fast_tier_fails_an_unmarked_test_that_starts_a_driver_and_leaves_out_cluster_and_soak(tmp_path):
    run = _run(tmp_path, "-m", "not cluster")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAILED test_inner.py::test_unmarked_starts_a_driver" in run.stdout, run.stdout
    assert "mark it @pytest.mark.cluster" in run.stdout and "seatide.runtime.driver" in run.stdout
    # the one that refused to start and the one that started something else pass; the
    # marked one and the soak one are not run
    assert "2 passed, 2 deselected" in run.stdout, run.stdout


@pytest.mark.parametrize("command, starts_cluster", [
    ([*SEATIDE, "cluster", "coordinator", "--port", "1"], True),
    ([*SEATIDE, "cluster", "worker", "--slots", "1"], True),
    ([*SEATIDE, "run", "job.conf"], True),
    ([os.path.join(os.path.dirname(sys.executable), "seatide"), "run", "job.conf"], True),
    (warm_command("sqlite:///x", 1.0, 3.0), True),
    ([sys.executable, "-m", "seatide.testing.chaos", "--seed", "7"], True),
    ([sys.executable, "-m", "seatide.cli.seatunnel", "-c", "job.conf", "-m", "local"], True),
    ([sys.executable, "-m", "seatide.cli.seatunnel", "-c", "job.conf", "-m", "local", "--check"], False),
    ([sys.executable, "-m", "seatide.cli.seatunnel", "-l", "--cluster", "http://127.0.0.1:1"], False),
    ([*SEATIDE, "check", "job.conf"], False),
    ([*SEATIDE, "list", "--store", "sqlite:///x"], False),
    ([sys.executable, "-c", "print(1)"], False),
    ([sys.executable, "-c", "pass", "seatide.runtime.driver", "warm"], False),      # a look-alike
    ("a shell string", False),
])
def test_what_counts_as_a_cluster_process(command, starts_cluster):
    assert cluster_command(command) == starts_cluster
