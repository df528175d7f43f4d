"""Who ends an attempt when its job ends: the driver says how it ended, the worker records
the process's exit, and nobody kills a driver that is still reporting its own end.

Each test holds the driver at the moment it matters with a failpoint gate, so the race
that used to record a FINISHED job's attempt as "killed by SIGKILL" happens every time.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from sqlalchemy import select

from seatide.store import schema as s
from seatide.store.address import default_store_url
from seatide.store.db import open_store
from tests.cli.test_local_run import ROOT, SEATIDE
from seatide.testing.cluster import wait_for
from seatide.testing.jobs import batch_job
from tests.stores import sqlite_only

pytestmark = pytest.mark.cluster


def _gate(point: str, path: str) -> dict:
    return {"SEATIDE_FAILPOINTS": f"{point}=gate:0:{path}"}


def _row(store, table, **where):
    with store.read() as conn:
        query = select(table)
        for column, value in where.items():
            query = query.where(table.c[column] == value)
        return conn.execute(query).first()


def test_local_run_lets_the_driver_report_its_end_after_the_job_finished(tmp_path):
    """`seatide run` stops its worker once the job is FINISHED; the driver, still about to
    report SUCCEEDED, is waited for instead of killed."""
    conf, data_dir, gate = tmp_path / "job.conf", str(tmp_path / "d"), str(tmp_path / "gate")
    conf.write_text(batch_job(str(tmp_path / "out"), rows=50))
    proc = subprocess.Popen([*SEATIDE, "run", str(conf), "--job-id", "ends", "--data-dir", data_dir],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(os.environ, **_gate("driver.before_end_attempt", gate)))
    try:
        wait_for(lambda: os.path.exists(os.path.join(data_dir, "state.db")), 120, message="the store")
        store = open_store(default_store_url(data_dir))
        wait_for(lambda: (lambda j: j is not None and j.status == "FINISHED")(_row(store, s.jobs, job_id="ends")),
                 180, message="job FINISHED while its driver is held before reporting its end")
        attempt = _row(store, s.attempts, job_id="ends")
        assert attempt.state == "RUNNING" and attempt.ended_at is None
        open(gate, "w").close()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    attempt = _row(store, s.attempts, job_id="ends")
    assert (attempt.state, attempt.exit_code, attempt.error) == ("SUCCEEDED", 0, None)
    assert "killing driver" not in err
    store.dispose()


@sqlite_only   # the worker's decision, not the store's
def test_worker_waits_for_a_driver_that_reported_its_end(cluster):
    """A driver held just after it reported SUCCEEDED is not killed by its worker; it exits
    by itself once released, and the exit is recorded as it happened (code 0)."""
    gate = os.path.join(cluster.data_dir, "after-end")
    cluster.coordinator("c1")
    worker = cluster.worker("w1", env=_gate("driver.after_end_attempt", gate))
    cluster.submit(batch_job(os.path.join(cluster.data_dir, "out"), rows=50), "held-after-end")
    cluster.wait_status("held-after-end", "FINISHED")
    wait_for(lambda: cluster.attempts("held-after-end")[0].state == "SUCCEEDED", 60, message="attempt SUCCEEDED")
    # Several worker passes (it steps every 0.25 s, heartbeats every 1 s) see the ended attempt.
    first = _row(cluster.store, s.nodes, node_id="w1").heartbeat_at
    wait_for(lambda: _row(cluster.store, s.nodes, node_id="w1").heartbeat_at >= first + 2, 30,
             message="two more worker heartbeats")
    attempt = cluster.attempts("held-after-end")[0]
    assert attempt.ended_at is None, "the worker killed a driver that had reported its end"
    open(gate, "w").close()
    wait_for(lambda: cluster.attempts("held-after-end")[0].ended_at is not None, 60, message="driver exit recorded")
    attempt = cluster.attempts("held-after-end")[0]
    assert (attempt.state, attempt.exit_code) == ("SUCCEEDED", 0)
    assert "killing driver" not in open(worker.log_path).read()
