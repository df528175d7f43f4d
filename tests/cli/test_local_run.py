"""`seatide run` and `seatide resume` in local mode, as a user runs them: real processes, real signals."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest
from sqlalchemy import func, select, update

from seatide.store import schema as s
from seatide.store.address import default_store_url
from seatide.store.clock import read_store_now
from seatide.store.db import open_store
from seatide.store.views import job_info
from seatide.testing.driver_processes import driver_pids
from seatide.testing.cluster import batch_gate, wait_for
from seatide.testing.jobs import assert_exactly, batch_job, committed_rows, written_ids
from seatide.timeouts import Timeouts
from tests.store.older_lease import LEADER_LEASE
from tests.store.test_recorded_environment_gate import at_revision_0021

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEATIDE = [sys.executable, "-m", "seatide.cli.main"]

pytestmark = pytest.mark.cluster


def seatide(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*SEATIDE, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_example_job_runs_and_prints_statistics(tmp_path):
    result = seatide("run", "examples/batch_fake_to_console.conf", "--data-dir", str(tmp_path / "d"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Job Statistic Information" in result.stdout and "FINISHED" in result.stdout
    rows = [line for line in result.stdout.splitlines() if line.startswith("rowIndex=")]
    assert rows and all("kind=+I" in line for line in rows)
    assert re.search(r"Total Write Count\s+: " + str(len(rows)) + r"\b", result.stdout)


def _gated(tmp_path) -> dict:
    # two batches commit, then the run is held until the test stops it
    return dict(os.environ, **batch_gate(str(tmp_path / "gate"), passes=2))


def test_ctrl_c_then_a_kill_and_each_resume_finishes_the_job_once(tmp_path):
    """Two stories in one job (one driver start fewer): Ctrl-C stops a run cleanly and a
    resume goes on from its checkpoint; that resume, SIGKILLed mid-way with its driver, is
    resumed again from its own checkpoint, seeing the dead worker by its free liveness lock.
    Each stop is held by a batch gate after two batches (200 rows each) of 1000 rows."""
    conf = tmp_path / "job.conf"
    out = str(tmp_path / "out")
    conf.write_text(batch_job(out, rows=1000, rows_per_batch=200))
    data_dir, job_id = str(tmp_path / "d"), "ctrlc"
    out += "/p0"
    proc = subprocess.Popen([*SEATIDE, "run", str(conf), "--job-id", job_id, "--data-dir", data_dir],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=_gated(tmp_path))
    wait_for(lambda: committed_rows(data_dir, job_id) >= 400, 180, message="two batches committed")
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-3000:]
    assert f"seatide resume ctrlc --data-dir {data_dir}" in stderr
    assert_exactly(written_ids(out), range(400))

    # the resume, held after two more batches, is killed with its driver
    resumed = subprocess.Popen([*SEATIDE, "resume", job_id, "--data-dir", data_dir], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=ROOT, env=_gated(tmp_path))
    wait_for(lambda: sum(written_ids(out).values()) >= 800, 180, message="two more batches committed")
    resumed.send_signal(signal.SIGKILL)
    resumed.wait(timeout=30)
    wait_for(lambda: driver_pids(job_id) == [], 15, message="the driver to die with seatide resume")
    assert_exactly(written_ids(out), range(800))
    store = open_store(default_store_url(data_dir))
    # The final resume starts once the killed run's last heartbeat is older than worker_lost_after,
    # however fast the machine (under load it was, by chance, and the resume waited a whole window).
    beat = _last_heartbeat_of_a_running_worker(store)
    wait_for(lambda: _store_now(store) > beat + Timeouts().worker_lost_after, Timeouts().worker_lost_after + 10,
             interval=0.1, message="the killed run's heartbeat older than worker_lost_after")

    final = seatide("resume", job_id, "--data-dir", data_dir)
    assert final.returncode == 0, final.stderr[-3000:]
    # The killed run's worker is seen dead by its free liveness lock, as a cluster's is. The
    # resume's leader counts the worker's silence only from its own first look, so by heartbeat
    # it would wait out worker_lost_after again; the lock is read during just that window, and
    # this line is logged only when the lock decided first.
    assert "died: its liveness lock has been free" in final.stderr, final.stderr[-3000:]
    assert_exactly(written_ids(out), range(1000))
    with store.read() as conn:
        info = job_info(conn, job_id)
    assert info["jobStatus"] == "FINISHED" and info["incarnation"] == 3 and info["checkpoint"]["restored"] >= 1
    store.dispose()


def _last_heartbeat_of_a_running_worker(store) -> float:
    """The newest heartbeat of a worker that did not stop cleanly (the killed run's)."""
    with store.read() as conn:
        return conn.execute(select(func.max(s.nodes.c.heartbeat_at)).where(
            s.nodes.c.role == "worker", s.nodes.c.stopped.is_(False))).scalar()


def _store_now(store) -> float:
    with store.read() as conn:
        return read_store_now(conn)


def _run_by_an_older_seatide(data_dir: str, expires_in: float) -> None:
    """A data directory an older `seatide run` led in: the store at 0021, its lease at epoch 3 expiring then."""
    store = open_store(default_store_url(data_dir))
    at_revision_0021(store)
    with store.write() as conn:
        conn.execute(update(LEADER_LEASE).values(node_id="coordinator-older", epoch=3,
                                                 expires_at=read_store_now(conn) + expires_in))
    store.dispose()


def test_a_run_where_an_older_seatide_ran_elects_its_coordinator_then_records_the_job(tmp_path):
    """A data directory an older `seatide run` led in (lease epoch 3, expired): opened, it moves to revision 0022,
    whose gate holds a marked job (every run's is) back until a leader is elected through the new lease table.
    The embedded coordinator is elected first, so the run is not refused."""
    data_dir = str(tmp_path / "d")
    _run_by_an_older_seatide(data_dir, -10.0)
    result = seatide("run", "examples/batch_fake_to_console.conf", "--data-dir", data_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "FINISHED" in result.stdout
    assert "waiting" not in result.stderr, result.stderr
    store = open_store(default_store_url(data_dir))
    with store.read() as conn:
        assert conn.execute(select(s.leadership.c.epoch, s.leadership.c.moved_at_epoch)).one() == (4, 3)
    store.dispose()


def test_a_run_waits_until_the_older_seatides_lease_expires_by_the_stores_clock_saying_until_when(tmp_path):
    """Second outside review of leasemove, L2: `seatide run` waited up to twice its own lease's ttl, whatever the
    copied lease's expiry. It waits until that expiry (the row's ``expires_at``), saying so and until when."""
    data_dir = str(tmp_path / "d")
    _run_by_an_older_seatide(data_dir, 4.0)
    result = seatide("run", "examples/batch_fake_to_console.conf", "--data-dir", data_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"seatide: waiting [1-4] s, until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(the store's clock\), for the "
                     rf"leader lease that a SeaTide older than this one held on {re.escape(data_dir)} \(coordinator "
                     r"coordinator-older\) to expire", result.stderr), result.stderr
    assert "FINISHED" in result.stdout
    store = open_store(default_store_url(data_dir))
    with store.read() as conn:
        assert conn.execute(select(s.leadership.c.epoch, s.leadership.c.moved_at_epoch)).one() == (4, 3)
    store.dispose()


def test_a_run_and_a_submit_where_an_older_seatides_lease_still_holds_say_what_to_do_there(tmp_path):
    """Outside review of leasemove, L2: the older lease runs an hour yet. `seatide run` said nothing while it
    waited, then gave a cluster's advice ("start a coordinator of this version"); `seatide submit` on the data
    directory (no --cluster) had no coordinator to start. Each says what, why and what to do in its own mode."""
    data_dir = str(tmp_path / "d")
    _run_by_an_older_seatide(data_dir, 3600.0)
    run = seatide("run", "examples/batch_fake_to_console.conf", "--data-dir", data_dir)
    assert run.returncode == 1, (run.stdout, run.stderr)
    # Its expiry is past what a run waits for (second review L2: it waited twice its own ttl): refused at once.
    assert "seatide: waiting" not in run.stderr, run.stderr
    assert (f"seatide: the data directory {data_dir} was run by a SeaTide older than this one: its leader lease "
            "(coordinator coordinator-older, epoch 3), moved when this run upgraded the store to revision 0022, runs "
            "until ") in run.stderr, run.stderr
    assert ("Nothing was submitted (this run waits for such a lease only when it expires within 60 s). Stop every "
            "process of the older SeaTide using this data directory") in run.stderr, run.stderr
    submit = seatide("submit", "examples/batch_fake_to_console.conf", "--data-dir", data_dir)
    assert submit.returncode == 1, (submit.stdout, submit.stderr)
    assert "Nothing was submitted. This command wrote to the store sqlite:///" in submit.stderr, submit.stderr
    assert "directly (no --cluster), and no coordinator of this version has been elected on it yet. Start one on " \
           "this store (`seatide cluster coordinator` with the same --store or --data-dir" in submit.stderr, submit.stderr
    for answer in (run, submit):
        assert "Start a coordinator of this version" not in answer.stderr and "Traceback" not in answer.stderr
    store = open_store(default_store_url(data_dir))
    with store.read() as conn:
        assert conn.execute(select(func.count()).select_from(s.jobs)).scalar() == 0
    store.dispose()
