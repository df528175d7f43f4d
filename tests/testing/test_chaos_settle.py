"""The chaos runner's own bookkeeping, found wrong by seed 2611 (10 minutes, private PostgreSQL):

* the settle's verdict named every job "did not converge" once any one had not, a FINISHED
  BATCH job among them;
* a process that ended by itself (a coordinator that could not open the store while it
  started, because chaos stopped the store a few seconds after restarting it) stayed down
  until the heal: the run went 8 minutes with no coordinator at all, where its supervisor
  (deploy/systemd: Restart=always, RestartSec=1) would have started it again a second later;
* its "2 driver processes at once" named pids only: which attempts, and whether the older one
  was a fenced driver on its way out (attempt 43, LOST, cut off while still starting) or a
  second run, took the logs of both workers to find.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from sqlalchemy import insert, update

from seatide.store import schema as s
from seatide.testing.chaos import Chaos
from seatide.testing.chaos_invariants import ChaosJob
from seatide.testing.cluster import wait_for
from seatide.testing.fleet import submit_fleet_jobs
from seatide.testing.servers import PrivatePostgres


def test_the_settle_names_only_the_jobs_that_did_not_converge(tmp_path):
    chaos = Chaos(2611, 0.0, f"sqlite:///{tmp_path / 'state.db'}", str(tmp_path), log=lambda line: None)
    try:
        finished, running = submit_fleet_jobs(chaos.cluster.store, str(tmp_path), 2, streaming=False,
                                              prefix="settle")
        with chaos.cluster.store.write() as conn:
            conn.execute(update(s.jobs).where(s.jobs.c.job_id == finished).values(status="FINISHED"))
            conn.execute(update(s.jobs).where(s.jobs.c.job_id == running).values(status="RUNNING"))
        chaos.jobs = [ChaosJob(finished, "BATCH", str(tmp_path / "out0")),
                      ChaosJob(running, "BATCH", str(tmp_path / "out1"))]
        chaos._settle(timeout=1.0)
    finally:
        chaos.cluster.stop_all()
    assert [v.split(":")[0] for v in chaos.report.violations] == [running], chaos.report.violations
    assert "BATCH job RUNNING, not FINISHED" in chaos.report.violations[0], chaos.report.violations


@pytest.mark.cluster
def test_a_process_that_ends_by_itself_is_started_again_as_its_supervisor_would(tmp_path):
    server = PrivatePostgres().start()
    lines: list[str] = []
    chaos = None
    try:
        chaos = Chaos(2611, 0.0, f"postgresql://postgres@127.0.0.1:{server.port}/postgres", str(tmp_path),
                      store_server=server, log=lines.append)
        chaos.began = time.time()
        # The store goes down behind chaos's back, as when it stops while a process chaos has
        # just restarted is still importing, so c1 never leads before it ends. It then ends
        # without chaos: killed as an OOM killer would, while it tries to open the store. (Its
        # own end on a store that stays down takes the opening's patience, OPEN_WAIT_S = 60 s;
        # the supervision does not depend on why it ended, and its line says which.)
        server.stop_server()
        c1 = chaos.cluster.coordinator("c1", wait=False)
        wait_for(lambda: "opening the state store" in open(c1.log_path, errors="replace").read(), 60,
                 message="c1 trying to open its store, which is down")
        c1.kill(signal.SIGKILL)
        server.start_server()

        def c1_leads() -> bool:
            chaos._wait(0.5)
            lease = chaos.cluster.leader()
            return (lease is not None and lease.node_id == "c1"
                    and any(p.name == "c1" and p.alive for p in chaos.cluster.procs))
        wait_for(c1_leads, 120, interval=0.0, message="c1 started again, and leading")
        assert any(line.startswith("chaos: c1 ended by itself (exit code -9") for line in lines), lines
    finally:
        if chaos is not None:
            chaos.cluster.stop_all()
        server.stop()


def test_two_drivers_of_a_job_are_named_with_their_attempts_and_only_two_that_could_run_are_a_violation(tmp_path):
    """Seed 2612's 10-minute run: a driver still starting when its host was cut off (its attempt
    LOST, never marked running) beside its replacement is no second run; the same pair where the
    lost attempt had run is a violation."""
    chaos = Chaos(2611, 0.0, f"sqlite:///{tmp_path / 'state.db'}", str(tmp_path), log=lambda line: None)
    [job] = submit_fleet_jobs(chaos.cluster.store, str(tmp_path), 1, streaming=False, prefix="two")
    with chaos.cluster.store.write() as conn:
        ended, live = (conn.execute(insert(s.attempts).values(
            job_id=job, incarnation=1, number=number, worker_id=worker, state=state, created_at=time.time(),
            heartbeat_at=beat, kill_requested=False)).inserted_primary_key[0]
            for number, worker, state, beat in ((1, "w-cut", "LOST", None), (2, "w2", "RUNNING", time.time())))
    # Two processes whose command lines name those attempts, as a driver's does
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "--attempt", str(attempt)])
             for attempt in (ended, live)]
    try:
        wait_for(lambda: all("--attempt" in open(f"/proc/{p.pid}/cmdline").read() for p in procs), 30,
                 message="both processes started")
        pids = [p.pid for p in procs]
        named, harmless = chaos._drivers_named(pids)
        chaos._judge_overlap(job, pids)
        judged_while_starting = (list(chaos.report.violations), list(chaos.report.measured))
        with chaos.cluster.store.write() as conn:      # the lost attempt had marked itself running
            conn.execute(update(s.attempts).where(s.attempts.c.attempt_id == ended).values(heartbeat_at=time.time()))
        chaos._judge_overlap(job, pids)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        chaos.cluster.stop_all()
    expected = {procs[0].pid: f"pid {procs[0].pid} attempt {ended} LOST, never marked running",
                procs[1].pid: f"pid {procs[1].pid} attempt {live} RUNNING"}
    assert named == "; ".join(expected[pid] for pid in sorted(expected)), named
    assert harmless == 1
    assert judged_while_starting[0] == [] and len(judged_while_starting[1]) == 1, judged_while_starting
    assert "all but one can never run" in judged_while_starting[1][0]
    assert len(chaos.report.violations) == 1 and "2 driver processes at once" in chaos.report.violations[0], \
        chaos.report.violations
