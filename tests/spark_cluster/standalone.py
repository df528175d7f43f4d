"""A real Spark standalone cluster on 127.0.0.1: one master and a few workers, started from
the PySpark distribution's own ``spark-class``, each in its own process group.

Everything a Spark daemon writes (logs, work dirs, executors' scratch space) stays under one
temporary directory; ports are free ones picked at start. A worker is "killed" as a machine
dies: SIGKILL to its whole process group, so its executor JVM and Python workers go with it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request

import pyspark

from seatide.testing.cluster import free_port, wait_for

SPARK_HOME = os.path.dirname(pyspark.__file__)
# Small and quick to start: two JVMs share a 2-core machine with the driver and other tests.
_DAEMON_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


class StandaloneCluster:
    def __init__(self, root: str, workers: int = 2, worker_env: dict | None = None):
        self.root = root
        self.port = free_port()
        self.webui_port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.worker_env = worker_env or {}
        self.master: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self._count = workers

    def _env(self, name: str, extra: dict | None = None) -> dict:
        env = {k: v for k, v in os.environ.items()
               # the daemons and their executors must not inherit the test's Python set-up:
               # executors get SeaTide's path from the driver's settings (spark.executorEnv)
               if k not in ("PYTHONPATH", "SEATIDE_FAILPOINTS", "PYSPARK_PYTHON", "SPARK_CONF_DIR")}
        scratch = os.path.join(self.root, name)
        os.makedirs(scratch, exist_ok=True)
        env.update({"SPARK_HOME": SPARK_HOME, "SPARK_LOCAL_DIRS": os.path.join(scratch, "local"),
                    "SPARK_WORKER_DIR": os.path.join(scratch, "work"), "SPARK_LOG_DIR": scratch,
                    "SPARK_NO_DAEMONIZE": "1", "SPARK_LOCAL_IP": "127.0.0.1",
                    "SPARK_DAEMON_JAVA_OPTS": _DAEMON_JAVA_OPTS, "SPARK_DAEMON_MEMORY": "256m"})
        env.update(extra or {})
        return env

    def _spawn(self, name: str, args: list[str], extra_env: dict | None = None) -> subprocess.Popen:
        log = open(os.path.join(self.root, f"{name}.log"), "ab")
        try:
            return subprocess.Popen([os.path.join(SPARK_HOME, "bin", "spark-class"), *args],
                                    stdout=log, stderr=subprocess.STDOUT, env=self._env(name, extra_env),
                                    start_new_session=True)
        finally:
            log.close()

    def start(self, timeout: float = 90) -> "StandaloneCluster":
        self.master = self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                             "--port", str(self.port), "--webui-port", str(self.webui_port)])
        self.workers = [self._start_worker(index) for index in range(self._count)]
        try:
            wait_for(lambda: len(self.alive_workers()) == self._count, timeout,
                     message=f"{self._count} Spark workers registered at {self.url}")
        except Exception as exc:
            # A fixture that fails in its set-up is not torn down: stop what we started here.
            logs = self.logs()
            self.stop()
            raise AssertionError(f"{exc}\n{logs}") from exc
        return self

    def _start_worker(self, index: int) -> subprocess.Popen:
        return self._spawn(f"worker{index}", ["org.apache.spark.deploy.worker.Worker", self.url,
                                              "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                                              "--webui-port", str(free_port())], self.worker_env)

    def state(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json", timeout=5) as response:
            body = response.read()
        try:
            return json.loads(body)
        except ValueError:
            # Seen once, while the master was starting: its UI served an HTML page at /json.
            # Not serving yet, to wait_for: it polls again.
            raise ConnectionError(f"the master's UI answered /json with {body[:60]!r}") from None

    def alive_workers(self) -> list[dict]:
        return [w for w in self.state()["workers"] if w["state"] == "ALIVE"]

    def busy_workers(self) -> list[dict]:
        """Workers an application's executor runs on right now."""
        return [w for w in self.alive_workers() if w.get("coresused", 0) > 0]

    def kill_worker(self, index: int) -> None:
        """SIGKILL worker ``index`` with its executors: a machine that dies mid-run."""
        os.killpg(self.workers[index].pid, signal.SIGKILL)
        self.workers[index].wait(timeout=30)

    def replace_dead_workers(self, timeout: float = 90) -> None:
        """Start a fresh worker for each killed one, so the next test has the full cluster."""
        for index, proc in enumerate(self.workers):
            if proc.poll() is not None:
                self.workers[index] = self._start_worker(index)
        wait_for(lambda: len(self.alive_workers()) == len(self.workers), timeout,
                 message=f"{len(self.workers)} Spark workers registered again\n{self.logs()}")

    def logs(self) -> str:
        out = []
        for name in ["master"] + [f"worker{i}" for i in range(len(self.workers))]:
            path = os.path.join(self.root, f"{name}.log")
            if os.path.exists(path):
                with open(path, errors="replace") as handle:
                    out.append(f"--- {name} ---\n" + handle.read()[-3000:])
        return "\n".join(out)

    def stop(self) -> None:
        for proc in [*self.workers, self.master]:
            if proc is not None and proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=30)


if __name__ == "__main__":      # a cluster to try things by hand: python -m tests.spark_cluster.standalone DIR
    cluster = StandaloneCluster(sys.argv[1]).start()
    print(cluster.url, f"http://127.0.0.1:{cluster.webui_port}/json", flush=True)
    try:
        signal.pause()
    finally:
        cluster.stop()
