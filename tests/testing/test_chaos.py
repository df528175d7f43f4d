"""The chaos runner, short and with a fixed seed: real processes, real faults, real checks.

CI runs it on a PostgreSQL server of its own, which the run stops and restarts and, as root,
reaches from one worker through a network partition it cuts and heals. The SQLite run (kills
only; the kill at every failpoint runs on SQLite in CI) is in the soak set: `-m soak`.
Longer runs are for operators (docs/testing.md, docs/operations.md); any seed must end with no violation.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from seatide.testing.partition import unavailable

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("store", [pytest.param("sqlite", marks=pytest.mark.soak), "private-postgres"])
def test_a_short_chaos_run_ends_with_no_violation(store, tmp_path):
    # On PostgreSQL the run begins with the faults whose classes must be seen every time: a
    # restart of the store's server under live processes, then a partition when root can make one.
    first = []
    if store == "private-postgres":
        first = ["restart_store_server", *(["partition_worker"] if unavailable() is None else [])]
    # Two jobs, one BATCH and one STREAMING: each kind's invariants checked, one driver fewer
    # to start again after every fault than with a second BATCH job (a third of the run's CPU).
    run = subprocess.run([sys.executable, "-m", "seatide.testing.chaos", "--seed", "7", "--duration", "15",
                          "--store", store, "--data-dir", str(tmp_path), "--jobs", "2",
                          "--first-faults", ",".join(first)],
                         capture_output=True, text=True, timeout=900)
    last = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    assert last.startswith("chaos: seed=7 "), run.stdout[-3000:] + run.stderr[-3000:]
    assert run.returncode == 0 and last.endswith("violations=0"), run.stdout[-6000:]
    assert "jobs=2 " in last, last
    faults = int(last.split("faults=")[1].split()[0])
    assert faults >= 3, last          # it did inject
    if store == "private-postgres":
        assert "store server restarted (fast)" in run.stdout, run.stdout[-6000:]
    if store == "private-postgres" and unavailable() is None:
        assert "partition w-cut" in run.stdout and "partition of w-cut healed" in run.stdout, run.stdout[-6000:]
