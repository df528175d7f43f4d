"""Jobs on a real Spark standalone cluster (one master, two workers on 127.0.0.1), run through
``seatide run`` as a user runs them; a Spark worker dies mid-run and every row still lands once.

The driver stays in SeaTide's own process (client mode); FakeSource's reads, the Sql UDF and
the LocalFile writes run in executors on the Spark workers. A job is held mid-way by the
executors themselves: ``source.fake.read_partition`` gates every read until the test opens it,
so the test kills a worker while one of the job's tasks is surely running there.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import psutil
import pytest

import seatide
from seatide.runtime.session import WORKER_SPARK_CONF_ENV
from seatide.testing.cluster import open_gate, wait_for
from seatide.testing.jobs import assert_exactly, committed_rows, written_ids
from tests.spark_cluster.standalone import StandaloneCluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEATIDE = [sys.executable, "-m", "seatide.cli.main"]
# The SeaTide this test runs (a worktree's src/ may differ from the venv's installed copy):
# executors must import exactly this one.
SEATIDE_FILE = os.path.abspath(seatide.__file__)

pytestmark = pytest.mark.cluster
STREAM_ROWS = 100_000      # per reader (parallelism 2), 10 per split

UDF = '''
def seatide_home(name: str) -> str:
    """Where the executor running this row imported SeaTide from."""
    import os
    import seatide
    return os.path.abspath(seatide.__file__)
'''


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory):
    cluster = StandaloneCluster(str(tmp_path_factory.mktemp("spark-standalone"))).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def spark_cluster(standalone_cluster):
    """The module's cluster with all its workers: one a test before killed is replaced now,
    when a test needs it, not after that test (CI runs one test here: a worker's JVM started
    after it for no one took ~5 s of its 40 s, 06:26:35 -> 06:26:39.6 in master.log)."""
    standalone_cluster.replace_dead_workers()
    return standalone_cluster


def _env_block(cluster: StandaloneCluster, gate: str, mode: str, master: bool = True) -> str:
    return f"""
  job.mode = {mode}
  {f'spark.master = "{cluster.url}"' if master else ""}
  spark.executor.memory = "512m"
  spark.executorEnv.SEATIDE_FAILPOINTS = "source.fake.read_partition=gate:0:{gate}"
  parallelism = 2
  checkpoint.interval = 1000
  job.retry.times = 0
"""


def batch_job(cluster, tmp_path, gate: str) -> str:
    udf = tmp_path / "where.py"
    udf.write_text(UDF)
    return f"""
env {{{_env_block(cluster, gate, "BATCH")}  micro-batch.max-rows = 100
}}
source {{
  FakeSource {{
    plugin_output = "fake"
    row.num = 150
    split.num = 3
    sequence.field = "seq"
    schema = {{ fields {{ seq = bigint, name = string }} }}
  }}
}}
transform {{
  Sql {{
    plugin_input = "fake"
    plugin_output = "rows"
    udfs = ["{udf}:seatide_home"]
    query = "select seq as id, seatide_home(name) as seatide from fake"
  }}
}}
sink {{
  LocalFile {{ plugin_input = "rows", path = "{tmp_path / 'out'}", file_format_type = "json" }}
}}
"""


def streaming_job(cluster, tmp_path, gate: str) -> str:
    return f"""
env {{{_env_block(cluster, gate, "STREAMING", master=False)}}}
source {{
  FakeSource {{
    row.num = {STREAM_ROWS}
    split.num = {STREAM_ROWS // 10}
    split.read-interval = 100
    sequence.field = "id"
    schema = {{ fields {{ id = bigint, name = string }} }}
  }}
}}
sink {{
  LocalFile {{ path = "{tmp_path / 'out'}", file_format_type = "json" }}
}}
"""


def _start(tmp_path, job_text: str, job_id: str, env: dict | None = None) -> tuple[subprocess.Popen, str]:
    conf = tmp_path / "job.conf"
    conf.write_text(job_text)
    data_dir = str(tmp_path / "d")
    proc = subprocess.Popen([*SEATIDE, "run", str(conf), "--job-id", job_id, "--data-dir", data_dir],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(os.environ, **(env or {})))
    return proc, data_dir


def _held_worker(cluster: StandaloneCluster) -> int | None:
    """A Spark worker whose executor runs a Python worker now: a read task held at the gate."""
    for index, worker in enumerate(cluster.workers):
        if worker.poll() is not None:
            continue
        for proc in psutil.process_iter(["cmdline"]):
            try:
                if os.getpgid(proc.pid) == worker.pid and any("pyspark" in a for a in proc.info["cmdline"] or ()) \
                        and "python" in os.path.basename((proc.info["cmdline"] or [""])[0]):
                    return index + 1        # 0 is falsy to wait_for
            except (ProcessLookupError, psutil.Error):
                continue
    return None


def _held_or_exited(cluster: StandaloneCluster, run: subprocess.Popen) -> int | None:
    if run.poll() is not None:      # a job refused or failed at start: say why now, not at the deadline
        raise AssertionError(f"seatide run exited {run.returncode} before a read was held:\n"
                             f"{run.stderr.read()[-4000:]}")
    return _held_worker(cluster)


def _kill_worker_mid_read(cluster: StandaloneCluster, gate: str, run: subprocess.Popen) -> None:
    index = wait_for(lambda: _held_or_exited(cluster, run), 300, message="a read task held on a Spark worker") - 1
    cluster.kill_worker(index)
    wait_for(lambda: len(cluster.alive_workers()) == 1, 60, message="the master to see the worker gone")
    open_gate(gate)


def test_batch_job_on_a_standalone_cluster_survives_a_dead_spark_worker(spark_cluster, tmp_path):
    gate = str(tmp_path / "gate")
    proc, _ = _start(tmp_path, batch_job(spark_cluster, tmp_path, gate), "sc-batch")
    try:
        _kill_worker_mid_read(spark_cluster, gate, proc)
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr[-4000:]
    assert "FINISHED" in stdout
    assert_exactly(written_ids(str(tmp_path / "out")), range(300))
    # every row went through an executor that imported the driver's own SeaTide
    homes = {json.loads(line)["seatide"] for root, _, files in os.walk(tmp_path / "out")
             if "/." not in root and "/_" not in root
             for name in files if name.endswith(".json") and not name.startswith((".", "_"))
             for line in open(os.path.join(root, name)) if line.strip()}
    assert homes == {SEATIDE_FILE}


@pytest.mark.soak     # CI runs the BATCH case on the same cluster
def test_streaming_job_on_a_standalone_cluster_survives_a_dead_spark_worker(spark_cluster, tmp_path):
    gate = str(tmp_path / "gate")
    # the job file names no master: the worker's setting sends it to the cluster (what
    # `seatide cluster worker --spark-conf spark.master=...` hands each of its drivers)
    proc, data_dir = _start(tmp_path, streaming_job(spark_cluster, tmp_path, gate), "sc-stream",
                            env={WORKER_SPARK_CONF_ENV: json.dumps({"spark.master": spark_cluster.url})})
    try:
        _kill_worker_mid_read(spark_cluster, gate, proc)
        # the job goes on with one worker: batches keep committing after the loss
        wait_for(lambda: committed_rows(data_dir, "sc-stream") >= 200, 300, message="batches after the worker died")
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr[-4000:]
    ids = written_ids(str(tmp_path / "out"))
    assert len(ids) >= 200
    # ids of reader r are r * STREAM_ROWS + 0, 1, ...; both readers admit split by split, so
    # a stop leaves the same prefix of each reader's ids, every one exactly once
    per_reader = max(i % STREAM_ROWS for i in ids) + 1
    assert_exactly(ids, [r * STREAM_ROWS + i for r in range(2) for i in range(per_reader)])
