"""The run's order (seatide.testing.run_order): under worksteal each test process starts
with its share of the long tests and ends with short ones."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

from seatide.testing.run_order import share_out


@dataclass
class Item:
    nodeid: str
    tier: str

    def get_closest_marker(self, name: str):
        return name if name == self.tier else None


def _module(name: str, tier: str, count: int) -> list[Item]:
    return [Item(f"tests/{name}.py::test_{i}", tier) for i in range(count)]


def test_each_share_starts_with_its_long_tests_and_the_fast_tier_evens_the_counts():
    items = (_module("fast_a", "fast", 40) + _module("cluster_small", "cluster", 1) + _module("spark_a", "spark", 6)
             + _module("cluster_big", "cluster", 4) + _module("fast_b", "fast", 30)
             + _module("cluster_mid", "cluster", 3))
    ordered = share_out(items, 2)
    assert sorted(i.nodeid for i in ordered) == sorted(i.nodeid for i in items)
    half = len(ordered) // 2
    shares = [ordered[:half], ordered[half:]]
    for share in shares:
        tiers = [i.tier for i in share]
        assert tiers[0] == "cluster" and tiers[-1] == "fast", tiers
        # no slower tier after a faster one within a share
        rank = {"cluster": 0, "spark": 1, "fast": 2}
        assert [rank[t] for t in tiers] == sorted(rank[t] for t in tiers), tiers
    # the heaviest module alone in one share, the two lighter cluster modules in the other
    first = {i.nodeid.split("::")[0] for i in shares[0] if i.tier == "cluster"}
    second = {i.nodeid.split("::")[0] for i in shares[1] if i.tier == "cluster"}
    assert first == {"tests/cluster_big.py"} and second == {"tests/cluster_mid.py", "tests/cluster_small.py"}
    for module in ("cluster_big", "cluster_mid", "spark_a"):     # a module with a long test stays whole
        at = [n for n, i in enumerate(ordered) if i.nodeid.startswith(f"tests/{module}.py")]
        assert at == list(range(at[0], at[0] + len(at)))


NOTE = """
import os

def note(request):
    with open(os.environ["ORDER_LOG"], "a") as log:
        log.write(os.environ["PYTEST_XDIST_WORKER"] + " " + request.node.name + "\\n")
"""
QUICK = """
import pytest
from note import note

@pytest.mark.parametrize("n", range(12))
def test_quick(request, n):
    note(request)
"""
LONG = """
import pytest
from note import note

@pytest.mark.cluster
def test_long(request):
    note(request)
"""


def test_under_worksteal_each_test_process_begins_with_a_long_test(tmp_path):
    """In collection order the quick module comes last; without the plugin the second
    process's share would be quick tests only."""
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    cluster: real processes\n    spark: session\n")
    (tmp_path / "note.py").write_text(NOTE)
    (tmp_path / "test_a_long.py").write_text(LONG)
    (tmp_path / "test_b_long.py").write_text(LONG)
    (tmp_path / "test_c_quick.py").write_text(QUICK)
    log = tmp_path / "order.log"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}, "ORDER_LOG": str(log),
           "PYTHONPATH": str(tmp_path)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "seatide.testing.run_order", "-p", "no:cacheprovider",
                          "-n", "2", "--dist", "worksteal", "-q"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    first: dict[str, str] = {}
    for line in log.read_text().splitlines():
        worker, name = line.split(" ", 1)
        first.setdefault(worker, name)
    assert sorted(first) == ["gw0", "gw1"] and all(n == "test_long" for n in first.values()), first
