"""Failpoints armed for one job's drivers (``failpoints.armed_for_job``): what lets a test
that holds or crashes a driver share a cluster with other tests' jobs.

A real coordinator and worker on a real SQLite store, in this process; the launcher records
the environment each driver would start with instead of starting a JVM (the subject is which
failpoints a driver is given, not what it does with them)."""

from __future__ import annotations

import threading

from seatide import failpoints, intents
from seatide.coordinator.service import Coordinator
from seatide.store.address import default_store_url
from seatide.store.db import open_store
from seatide.testing.cluster import wait_for
from seatide.testing.jobs import CONSOLE_JOB
from seatide.testing.sim_machine import SimProcess
from seatide.worker.agent import Worker


class RecordingLauncher:
    """Each launched driver's environment, by job id (read from its ``--job-id`` argument)."""

    def __init__(self):
        self.envs: dict[str, dict] = {}

    def start(self, command, log_file, env, inherit_stdout):
        self.envs[command[command.index("--job-id") + 1]] = env
        return SimProcess(4_000_000 + len(self.envs))


def _launch_envs(tmp_path, jobs: list[str]) -> dict[str, dict]:
    """Submit ``jobs`` and run a leader's passes until the worker has launched each: their drivers' environments."""
    data_dir = str(tmp_path / "cluster")
    url = default_store_url(data_dir)
    store = open_store(url)
    coordinator = Coordinator(store, node_id="c", data_dir=data_dir)
    launcher = RecordingLauncher()
    worker = Worker(store, url, data_dir, node_id="w", slots=len(jobs), poll=0.05, launcher=launcher)
    running = threading.Thread(target=worker.run, name="worker", daemon=True)
    running.start()
    try:
        for job_id in jobs:
            intents.submit(store, data_dir, text=CONSOLE_JOB, job_id=job_id, actor="test")
        wait_for(lambda: (coordinator.lease.tick() and coordinator.reconcile_all()) or len(launcher.envs) == len(jobs),
                 30, interval=0.05, message="the worker to launch every job's driver")
        return launcher.envs
    finally:
        worker.stop()
        running.join(30)
        store.dispose()


def test_a_failpoint_armed_for_a_job_reaches_its_driver_alone(tmp_path, monkeypatch):
    armed_dir = tmp_path / "job-failpoints"
    armed_dir.mkdir()
    (armed_dir / "armed").write_text("driver.batch_start=gate:1:/nowhere\n")
    monkeypatch.setenv(failpoints.JOB_POINTS_ENV, str(armed_dir))
    monkeypatch.setenv("SEATIDE_FAILPOINTS", "worker.own=sleep:0,driver.batch_start=raise")
    envs = _launch_envs(tmp_path, ["armed", "plain"])
    # the worker's own points stay; the job's win where both arm one (parsed in order)
    assert envs["armed"]["SEATIDE_FAILPOINTS"] == ("worker.own=sleep:0,driver.batch_start=raise,"
                                                   "driver.batch_start=gate:1:/nowhere")
    assert failpoints._parse(envs["armed"]["SEATIDE_FAILPOINTS"])["driver.batch_start"] == "gate:1:/nowhere"
    assert envs["plain"]["SEATIDE_FAILPOINTS"] == "worker.own=sleep:0,driver.batch_start=raise"


def test_without_the_testing_switch_no_job_arms_a_failpoint(tmp_path, monkeypatch):
    """A worker not started with SEATIDE_JOB_FAILPOINTS reads no per-job file, wherever one is."""
    monkeypatch.delenv(failpoints.JOB_POINTS_ENV, raising=False)
    monkeypatch.delenv("SEATIDE_FAILPOINTS", raising=False)
    (tmp_path / "armed").write_text("driver.batch_start=kill\n")
    monkeypatch.chdir(tmp_path)
    envs = _launch_envs(tmp_path, ["armed"])
    assert "SEATIDE_FAILPOINTS" not in envs["armed"]


def test_a_job_id_that_is_not_a_plain_name_arms_nothing(tmp_path, monkeypatch):
    armed_dir = tmp_path / "job-failpoints"
    armed_dir.mkdir()
    (tmp_path / "outside").write_text("driver.batch_start=kill\n")
    monkeypatch.setenv(failpoints.JOB_POINTS_ENV, str(armed_dir))
    assert failpoints.armed_for_job("../outside") == ""
    assert failpoints.armed_for_job("..") == ""
    assert failpoints.armed_for_job("no-such-job") == ""
