"""A real cluster for fault tests and the chaos runner: coordinator and worker processes on a real store.

Processes are started with the ``seatide`` CLI and killed with real signals. Tests wait
on conditions read from the store or the REST API (``wait_for``), never on fixed sleeps.
``DriverWatch`` samples the process table while a test runs, so the invariant "never
two drivers for one job" is checked at every moment it could have been broken.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from sqlalchemy import func, select

from seatide.failpoints import JOB_POINTS_ENV, POINTS_ENV
from seatide.store import schema as s
from seatide.store.clock import read_store_now
from seatide.store.db import open_store
from seatide.store.states import ATTEMPT_LIVE, JOB_TERMINAL
from seatide.testing.driver_processes import driver_pids
from seatide.testing.ports import free_port  # noqa: F401  (the tests' import point)

SEATIDE = [sys.executable, "-m", "seatide.cli.main"]


def wait_for(condition, timeout: float, interval: float = 0.2, message: str = "condition"):
    """Poll ``condition`` until it returns a truthy value; fail with ``message`` at the deadline."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = condition()
        except (urllib.error.URLError, ConnectionError, OSError):
            last = None
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {message} (last: {last!r})")


def batch_gate(path: str, passes: int, pipeline: int | None = None) -> dict:
    """Environment that lets a driver commit ``passes`` micro-batches, then holds it until
    ``path`` exists or the job is stopped: a job that is surely mid-way, however fast the host.
    With ``pipeline``, only that pipeline is counted and held; the others run freely."""
    point = "driver.batch_start" if pipeline is None else f"driver.batch_start@{pipeline}"
    return {POINTS_ENV: f"{point}=gate:{passes}:{path}"}


def open_gate(path: str) -> None:
    with open(path, "w"):
        pass


def http(method: str, url: str, body: dict | None = None, timeout: float = 30.0):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    url: str | None = None
    log_path: str = ""
    args: list[str] = field(default_factory=list)
    env: dict | None = None
    wrap: list[str] = field(default_factory=list)   # e.g. ``ip netns exec NS``: a restart keeps it

    def kill(self, sig: int = signal.SIGKILL) -> None:
        try:
            os.kill(self.popen.pid, sig)
        except ProcessLookupError:
            pass
        if sig == signal.SIGKILL:
            self.popen.wait(timeout=30)

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None


@dataclass
class Cluster:
    store_url: str
    data_dir: str
    # Short, and within the margins Timeouts.check asserts (a driver fences itself within
    # 3 + 0.5 + 1 s, before it may be declared hung or its worker lost).
    timeouts: dict = field(default_factory=lambda: {"driver": 6.0, "worker": 5.0, "self_fence": 3.0,
                                                    "interval": 0.5})
    cleanup_delay: float = 60.0
    # Workers start every driver cold unless a test asks for warm ones:
    # on a 2-core host an idle warm JVM per worker competes with the job a test is timing.
    warm_drivers: int = 0
    # Coordinators skip planning a sample job at start (--no-plan-warm-up) unless a test or
    # bench times a first submit: a second of CPU per coordinator, and a suite starts hundreds.
    plan_warm_up: bool = False
    procs: list[Proc] = field(default_factory=list)
    # Other URLs of the same store some workers were given (one reached through a partition):
    # their drivers carry that URL, and stop_all must find them too.
    other_store_urls: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.store = open_store(self.store_url)
        os.makedirs(os.path.join(self.data_dir, "proc-logs"), exist_ok=True)

    def _spawn(self, name: str, args: list[str], url: str | None = None, env: dict | None = None,
               wrap: list[str] | None = None) -> Proc:
        log_path = os.path.join(self.data_dir, "proc-logs", f"{name}.log")
        with open(log_path, "ab") as log:
            popen = subprocess.Popen([*(wrap or []), *SEATIDE, *args], stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
        proc = Proc(name, popen, url, log_path, args, env, list(wrap or []))
        self.procs.append(proc)
        return proc

    def restart(self, proc: Proc) -> Proc:
        """The same process again (same name, arguments and port), without waiting for it."""
        self.procs.remove(proc)
        return self._spawn(proc.name, proc.args, proc.url, proc.env, proc.wrap)

    def _common(self, store_url: str | None = None) -> list[str]:
        return ["--store", store_url or self.store_url, "--data-dir", self.data_dir,
                "--driver-heartbeat-timeout", str(self.timeouts["driver"]),
                "--worker-heartbeat-timeout", str(self.timeouts["worker"]),
                "--driver-self-fence-after", str(self.timeouts["self_fence"]),
                "--heartbeat-interval", str(self.timeouts["interval"]),
                "--worker-heartbeat-interval", str(self.timeouts["interval"])]

    def coordinator(self, name: str = "c1", extra: list[str] | None = None, env: dict | None = None,
                    wait: bool = True) -> Proc:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = self._spawn(name, ["cluster", "coordinator", "--port", str(port), "--node-id", name,
                                  "--state-cleanup-delay", str(self.cleanup_delay),
                                  *self._common(), *([] if self.plan_warm_up else ["--no-plan-warm-up"]),
                                  *(extra or [])], url, env)
        if wait:
            self.wait_serving(proc)
        return proc

    def wait_serving(self, *coordinators: Proc) -> None:
        """Until every one of ``coordinators`` (started with ``wait=False``) serves its API."""
        # 401: serving, with reads behind the API token (--auth-reads)
        wait_for(lambda: all(http("GET", c.url + "/api/v1/overview")[0] in (200, 401) for c in coordinators), 90,
                 message=f"{[c.name for c in coordinators]} serving")

    def worker(self, name: str = "w1", slots: int = 2, env: dict | None = None,
               extra: list[str] | None = None, wrap: list[str] | None = None, store_url: str | None = None,
               wait: bool = True) -> Proc:
        """``wrap`` prefixes its command (run it in a network namespace); ``store_url``: the
        store as this worker reaches it, when not as the cluster does (add it to other_store_urls)."""
        proc = self._spawn(name, ["cluster", "worker", "--node-id", name, "--slots", str(slots),
                                  *self._common(store_url), "--warm-drivers", str(self.warm_drivers),
                                  *(extra or [])], env={JOB_POINTS_ENV: self._armed_dir, **(env or {})}, wrap=wrap)
        if wait:
            self.wait_registered(proc)
        return proc

    def wait_registered(self, *workers: Proc) -> None:
        """Until every one of ``workers`` (started with ``wait=False``) heartbeats in the store."""
        wait_for(lambda: all(self._node_alive(w.name) for w in workers), 90,
                 message=f"workers {[w.name for w in workers]} registered")

    @property
    def _armed_dir(self) -> str:
        return os.path.join(self.data_dir, "job-failpoints")

    def arm(self, job_id: str, points: str | dict) -> None:
        """Arm failpoints for ``job_id``'s drivers alone (``failpoints.armed_for_job``), before
        it is submitted: its attempts' drivers, started by this cluster's workers, meet them; the
        other jobs' do not. ``points``: a spec, or an environment as ``batch_gate`` gives."""
        spec = points[POINTS_ENV] if isinstance(points, dict) else points
        os.makedirs(self._armed_dir, exist_ok=True)
        with open(os.path.join(self._armed_dir, job_id), "w") as handle:
            handle.write(spec)

    def _node_alive(self, node_id: str) -> bool:
        with self.store.read() as conn:      # heartbeats are the store's time: compared with it
            row = conn.execute(select(s.nodes).where(s.nodes.c.node_id == node_id)).first()
            return row is not None and read_store_now(conn) - row.heartbeat_at < 2

    def leader(self):
        with self.store.read() as conn:
            return conn.execute(select(s.leadership).where(s.leadership.c.id == 1)).first()

    def _store_now(self) -> float:
        with self.store.read() as conn:
            return read_store_now(conn)

    def leader_proc(self) -> Proc:
        lease = wait_for(lambda: (lambda l: l if l.node_id and l.expires_at > self._store_now() else None)(
            self.leader()), 15, message="a leader")
        return next(p for p in self.procs if p.name == lease.node_id and p.alive)

    def leader_has_reconciled(self, seconds: float = 1.0) -> None:
        """Wait until the current leader has held the lease (and so reconciled) for ``seconds``."""
        start = self.leader()
        seen: list = []         # the lease rows read, so a failure says whether it moved or stopped

        def kept() -> bool:
            lease = self.leader()
            if not seen or seen[-1] != (lease.node_id, lease.epoch):
                seen.append((lease.node_id, lease.epoch))
            return lease.epoch == start.epoch and lease.expires_at >= start.expires_at + seconds
        try:
            wait_for(kept, seconds + 10, message=f"the leader {start.node_id} (epoch {start.epoch}) to keep its lease")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; holders seen since: {seen}") from None

    def cancel(self, job_id: str) -> None:
        status, body = http("POST", self.any_coordinator().url + "/api/v1/stop-job", {"jobId": job_id})
        assert status == 200, body

    def any_coordinator(self) -> Proc:
        return next(p for p in self.procs if p.url and p.alive)

    def submit(self, config: str, job_id: str, variables: dict | None = None, timeout: float = 60.0) -> str:
        # A coordinator's first submit imports the config and SQL machinery (8-10 s on a loaded
        # 2-core machine): more than suits the other requests.
        status, body = http("POST", self.any_coordinator().url + "/api/v1/submit-job",
                            {"config": config, "jobId": job_id, "variables": variables or {}}, timeout=timeout)
        assert status == 200, body
        return body["jobId"]

    def job(self, job_id: str):
        with self.store.read() as conn:
            return conn.execute(select(s.jobs).where(s.jobs.c.job_id == job_id)).first()

    def job_info(self, job_id: str) -> dict:
        """From the REST API of a live coordinator, else from the same read model on the store."""
        if any(p.url and p.alive for p in self.procs):
            return http("GET", self.any_coordinator().url + f"/api/v1/job-info/{job_id}")[1]
        from seatide.store.views import job_info
        with self.store.read() as conn:
            return job_info(conn, job_id)

    def wait_status(self, job_id: str, statuses: set[str] | str, timeout: float = 180.0):
        wanted = {statuses} if isinstance(statuses, str) else statuses
        return wait_for(lambda: (lambda j: j if j is not None and j.status in wanted else None)(self.job(job_id)),
                        timeout, message=f"job {job_id} in {sorted(wanted)}")

    def checkpoint_dir(self, job_id: str, pipeline_id: int = 1) -> str:
        """The pipeline's checkpoint directory in the job's current run (``store/runs.py``)."""
        with self.store.read() as conn:
            return conn.execute(select(s.pipelines.c.checkpoint_dir).where(
                s.pipelines.c.job_id == job_id, s.pipelines.c.pipeline_id == pipeline_id)
                .order_by(s.pipelines.c.incarnation.desc()).limit(1)).scalar()

    def last_checkpoint(self, job_id: str) -> int:
        """The job's newest checkpoint id (0 before any), read from the store itself: cheaper than
        the REST API (a coordinator builds the whole job view per call, ~10 ms of its CPU) for a
        test polling for the next one, and not late when a loaded coordinator answers late."""
        with self.store.read() as conn:
            return conn.execute(select(func.max(s.pipelines.c.last_checkpoint_id)).where(
                s.pipelines.c.job_id == job_id)).scalar() or 0

    def attempts(self, job_id: str) -> list:
        with self.store.read() as conn:
            return list(conn.execute(select(s.attempts).where(s.attempts.c.job_id == job_id)
                                     .order_by(s.attempts.c.attempt_id)))

    def store_urls(self) -> tuple[str, ...]:
        """This cluster's store as each of its processes reaches it."""
        return (self.store_url, *self.other_store_urls)

    def driver_pids(self) -> list[int]:
        """Drivers of this cluster's store, however their worker reached it."""
        return driver_pids(store_url=self.store_urls())

    def ended_attempts(self, job_id: str, timeout: float = 60.0) -> list:
        """The job's attempts once none is live. A job ends when its pipelines have; its
        driver reports its own end just after (``driver.before_end_attempt``), so a test that
        reads attempts right at the job's end would race that report."""
        return wait_for(lambda: (lambda a: a if a and not any(x.state in ATTEMPT_LIVE for x in a) else None)(
            self.attempts(job_id)), timeout, message=f"job {job_id}'s attempts to end")

    def events(self, job_id: str | None = None) -> list:
        with self.store.read() as conn:
            query = select(s.events).order_by(s.events.c.seq)
            if job_id is not None:
                query = query.where(s.events.c.job_id == job_id)
            return list(conn.execute(query))

    def end_live_jobs(self, grace: float = 5.0) -> None:
        """Cancel every job not yet ended; kill the drivers of those still live ``grace`` s later
        (a driver held by a failpoint may never see the cancel). A shared cluster's next test then
        finds its slots free, whatever this one left behind."""
        def live() -> list[str]:
            with self.store.read() as conn:
                return list(conn.execute(select(s.jobs.c.job_id).where(s.jobs.c.status.not_in(sorted(JOB_TERMINAL)))).scalars())
        for job_id in live():
            http("POST", self.any_coordinator().url + "/api/v1/stop-job", {"jobId": job_id})
        try:
            wait_for(lambda: not live(), grace, message="the canceled jobs to end")
        except AssertionError:
            for job_id in live():
                for pid in driver_pids(job_id, self.store_urls()):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            wait_for(lambda: not live(), 120, message="the jobs whose drivers were killed to end")

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.alive:
                proc.kill(signal.SIGKILL)
        for pid in self.driver_pids():   # never another run's drivers
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.store.dispose()

    def logs(self) -> str:
        out = []
        for proc in self.procs:
            with open(proc.log_path, errors="replace") as handle:
                out.append(f"===== {proc.name} =====\n" + handle.read()[-6000:])
        return "\n".join(out)


def assert_never_resurrected(cluster: Cluster, job_id: str) -> None:
    """Once an incarnation reached a terminal status, no later event moved its status."""
    ended: dict[int, str] = {}
    for event in cluster.events(job_id):
        if not event.kind.startswith("JOB_") or event.kind == "JOB_SUBMITTED":
            continue
        status = event.kind[4:]
        assert event.incarnation not in ended, (
            f"job {job_id} incarnation {event.incarnation} moved to {status} after ending {ended[event.incarnation]}")
        if status in JOB_TERMINAL:
            ended[event.incarnation] = status
