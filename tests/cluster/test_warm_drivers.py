"""A worker's warm drivers, with real processes: a job runs in a driver started before it
was submitted, the pool refills, a job with other Spark settings gets a cold driver, and
warm drivers never outlive their worker or stay dead."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest
from sqlalchemy import func, select

from seatide.coordinator.service import is_driver_of
from seatide.store import schema as s
from seatide.store.paths import driver_log_path
from seatide.testing.driver_processes import DriverWatch, started_since_boot
from seatide.testing.cluster import batch_gate, open_gate, wait_for
from seatide.testing.jobs import assert_exactly, batch_job, written_ids
from tests.cluster.warm import ready_warm_pid, warm_pids
from tests.stores import sqlite_only

pytestmark = pytest.mark.cluster


@pytest.fixture(autouse=True)
def warm_pool(cluster):
    cluster.warm_drivers = 1


def _since_boot() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


@sqlite_only
def test_a_job_runs_in_the_warm_driver_started_before_its_submit_and_the_pool_refills(cluster, tmp_path):
    gate = str(tmp_path / "gate")
    cluster.coordinator()
    worker = cluster.worker("w1", env=batch_gate(gate, 0))    # holds each driver at its first batch
    warm = ready_warm_pid(worker)
    submitted_at = _since_boot()
    out = str(tmp_path / "out")
    with DriverWatch("warm1") as watch:
        cluster.submit(batch_job(out, rows=200, rows_per_batch=100), "warm1")
        first = wait_for(lambda: (lambda a: a[0] if a and a[0].pid else None)(cluster.attempts("warm1")), 120,
                         message="the first attempt's pid")
        assert first.pid == warm
        assert started_since_boot(warm) < submitted_at
        # Held at its first batch, it is the attempt's driver to anyone reading the process table.
        # (At load 20+ Spark may fail the attempt before the gate, "Python worker failed to
        # connect back", and the job's retry runs it: then there is nothing left to read.)
        try:
            argv = psutil.Process(warm).cmdline()
        except psutil.NoSuchProcess:
            argv = None
        if argv is not None:
            assert is_driver_of(argv, cluster.store_url, "warm1", first.attempt_id), argv
            # and no replacement starts beside its start-up: the refill waits for its first commit
            assert warm_pids(worker) == []
        open_gate(gate)
        cluster.wait_status("warm1", "FINISHED")
    assert watch.max_seen <= 1
    assert_exactly(written_ids(out + "/p0"), range(200))
    attempts = wait_for(lambda: (lambda a: a if all(x.ended_at for x in a) else None)(cluster.attempts("warm1")),
                        60, message="the worker to record the warm drivers' exits")
    assert (attempts[-1].state, attempts[-1].exit_code) == ("SUCCEEDED", 0)
    assert not _alive(warm)
    log_text = open(driver_log_path(cluster.data_dir, "warm1", first.attempt_id), errors="replace").read()
    assert f"warm driver pid {warm} takes job warm1 attempt {first.attempt_id}" in log_text
    # The pool refilled: a driver started after the hand-over runs the next job.
    used = {a.pid for a in attempts}
    refill = ready_warm_pid(worker, other_than=used)
    assert started_since_boot(refill) > submitted_at
    # ... but only once the taken driver had committed its first batch (its start-up was over),
    # however long that took (--warm-refill-hold, 300 s, is far off).
    refill_started = time.time() - (_since_boot() - started_since_boot(refill))
    with cluster.store.read() as conn:
        first_commit = conn.execute(select(func.min(s.checkpoints.c.created_at)).where(
            s.checkpoints.c.job_id == "warm1")).scalar()
    assert refill_started >= first_commit - 0.05
    cluster.submit(batch_job(str(tmp_path / "out2"), rows=50), "warm2")
    cluster.wait_status("warm2", "FINISHED")
    assert cluster.attempts("warm2")[0].pid == refill
    assert_exactly(written_ids(str(tmp_path / "out2") + "/p0"), range(50))


@sqlite_only
@pytest.mark.soak     # the rule itself: tests/runtime/test_warm_session_fit.py
def test_a_job_with_its_own_spark_master_gets_a_cold_driver(cluster, tmp_path):
    cluster.coordinator()
    worker = cluster.worker("w1")
    warm = ready_warm_pid(worker)
    out = str(tmp_path / "out")
    config = batch_job(out, rows=50).replace("env {\n", 'env {\n  spark.master = "local[1]"\n', 1)
    cluster.submit(config, "cold1")
    cluster.wait_status("cold1", "FINISHED")
    attempts = wait_for(lambda: (lambda a: a if all(x.ended_at for x in a) else None)(cluster.attempts("cold1")),
                        60, message="the worker to record the cold driver's exit")
    assert warm not in {a.pid for a in attempts} and attempts[-1].exit_code == 0
    assert warm_pids(worker) == [warm]           # the warm driver was left alone, still idle
    assert_exactly(written_ids(out + "/p0"), range(50))
    with open(worker.log_path, errors="replace") as handle:
        assert "gets a cold driver: spark.master is 'local[1]'" in handle.read()


@sqlite_only
def test_a_warm_driver_killed_idle_is_replaced_and_none_outlive_their_worker(cluster):
    cluster.coordinator()
    worker = cluster.worker("w1")
    # Killed idle while its Spark starts (its JVM already a child): the pool replaces an idle
    # driver that died whether or not it was ready yet (WarmPool.refill), and not waiting for
    # this one's Spark saves a start-up (~30 s) of CI.
    first = wait_for(lambda: _starting_with_a_child(worker), 180, message="a warm driver starting its JVM")
    os.kill(first, signal.SIGKILL)
    second = ready_warm_pid(worker, other_than={first})
    assert warm_pids(worker) == [second]
    family = [second, *(p.pid for p in psutil.Process(second).children(recursive=True))]
    assert len(family) >= 2, "a ready warm driver runs its JVM as a child"
    worker.kill(signal.SIGKILL)
    wait_for(lambda: not any(_alive(pid) for pid in family), 30,
             message=f"the dead worker's warm driver and its JVM ({family}) gone")


def _starting_with_a_child(worker) -> int | None:
    """An idle warm driver of ``worker`` that has started a child (its JVM)."""
    for pid in warm_pids(worker):
        try:
            if psutil.Process(pid).children():
                return pid
        except psutil.NoSuchProcess:
            continue
    return None


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
