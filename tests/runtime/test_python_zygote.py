"""The Python zygote forks streaming source runners for Spark, and is never needed for one.

The protocol tests play the JVM's part as Spark does for a simple Python worker: start the
client with ``-m pyspark.sql.streaming.python_streaming_source_runner`` and the environment
that names a socket to connect back to, then read the pid the runner sends first."""

from __future__ import annotations

import ast
import os
import signal
import socket
import struct
import subprocess
import sys

import psutil
import pytest

from seatide.runtime import python_zygote, zygote_request
from seatide.testing.cluster import wait_for

RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"
# What Spark adds to the environment of each Python process it starts (the JVM's PythonWorkerFactory,
# and PySpark's SparkContext: PYTHONHASHSEED is the driver's, else "0"), as measured.
SPARK_WORKER_ENV = {"PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "YES"}


def _zygote_state(zygote) -> str:
    """Why a client may have started the real interpreter: a zygote that died (and how), or one
    alive that refused (its import-time settings differ from the request's)."""
    code = zygote.process.poll()
    return "the zygote is alive" if code is None else f"the zygote exited with {code}"


@pytest.fixture
def zygote(tmp_path):
    zygote = python_zygote.spawn(str(tmp_path))
    wait_for(lambda: os.path.exists(tmp_path / "zygote.sock"), 60, message="the zygote accepting")
    yield zygote
    zygote.process.terminate()
    zygote.process.wait(timeout=30)


class FakeJvm:
    """The JVM's end of a Python worker: a Unix socket the runner connects back to."""

    def __init__(self, directory):
        self.path = os.path.join(str(directory), "jvm.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(1)
        self.server.settimeout(60)

    def start_runner(self, client: str, cwd: str, **extra_env: str) -> subprocess.Popen:
        env = {**os.environ, **SPARK_WORKER_ENV, "PYTHON_WORKER_FACTORY_SOCK_PATH": self.path, **extra_env}
        env.pop("PYTHON_WORKER_FACTORY_SECRET", None)
        return subprocess.Popen([client, "-m", RUNNER], env=env, cwd=cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)

    def accept_runner(self) -> tuple[socket.socket, int]:
        conn, _ = self.server.accept()
        conn.settimeout(60)
        data = b""
        while len(data) < 4:
            data += conn.recv(4 - len(data))
        return conn, struct.unpack("!i", data)[0]


def test_a_runner_is_forked_by_the_zygote_with_the_clients_environment_and_exits_as_it_does(zygote, tmp_path):
    jvm = FakeJvm(tmp_path)
    workdir = tmp_path / "work"
    workdir.mkdir()
    client = jvm.start_runner(zygote.client, str(workdir))
    conn, runner_pid = jvm.accept_runner()
    runner = psutil.Process(runner_pid)
    assert runner.ppid() == zygote.process.pid          # forked, not started afresh
    assert runner_pid != client.pid
    # It connected to the socket that only the client's environment names (the zygote's lacks it),
    # so it runs with the client's environment.
    assert "PYTHON_WORKER_FACTORY_SOCK_PATH" not in psutil.Process(zygote.process.pid).environ()
    assert runner.cwd() == str(workdir)
    conn.close()                 # the JVM hangs up: the runner fails reading, as a fresh one would
    out, err = client.communicate(timeout=60)
    assert client.returncode != 0
    assert b"Traceback" in err or b"EOF" in err or client.returncode < 0, err
    wait_for(lambda: _gone(runner), 30, message="the runner gone")


def test_killing_the_client_kills_its_runner(zygote, tmp_path):
    """What the JVM does to a worker it stops is done to the runner."""
    jvm = FakeJvm(tmp_path)
    client = jvm.start_runner(zygote.client, str(tmp_path))
    conn, runner_pid = jvm.accept_runner()
    runner = psutil.Process(runner_pid)
    client.send_signal(signal.SIGKILL)
    client.wait(timeout=30)
    wait_for(lambda: _gone(runner), 30, message="the runner killed with its client")
    conn.close()


def test_a_client_gone_before_its_status_leaves_the_zygote_serving(zygote, tmp_path):
    """The JVM may end a client between its request and the zygote's answer (a query stopped
    as it starts): the zygote's answer then meets a closed socket, and it must go on serving.
    Held here by hanging up right after the request, so the answer always meets the close."""
    env = {**os.environ, "PYTHON_WORKER_FACTORY_SOCK_PATH": str(tmp_path / "nobody.sock")}
    request = "\0".join([RUNNER, str(tmp_path), "18", "13", "", "", "0", *(f"{k}={v}" for k, v in env.items())]).encode()
    with open(os.devnull, "rb") as null_in, open(os.devnull, "wb") as null_out:
        for _ in range(3):
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(str(tmp_path / "zygote.sock"))
            socket.send_fds(conn, [struct.pack("!I", len(request))], [null_in.fileno(), null_out.fileno(),
                                                                      null_out.fileno()])
            conn.sendall(request)
            conn.close()
    jvm = FakeJvm(tmp_path)
    client = jvm.start_runner(zygote.client, str(tmp_path))
    conn, runner_pid = jvm.accept_runner()
    assert zygote.process.poll() is None, "the zygote died answering a client that had gone"
    assert psutil.Process(runner_pid).ppid() == zygote.process.pid
    conn.close()
    client.communicate(timeout=60)


def test_a_childs_exit_and_its_clients_hang_up_in_one_round_leave_the_zygote_serving():
    """One select() round of the zygote can report a runner's exit (reaped first) and its
    client's hang-up. The hang-up then meets a client already forgotten: it must be a no-op,
    not a second unregister (its ValueError ended the zygote, and with it the speed of every later
    Spark Python process of the driver)."""
    import selectors

    ours, theirs = socket.socketpair()
    selector = selectors.DefaultSelector()
    selector.register(ours, selectors.EVENT_READ, "client")
    pid = 2 ** 22 + 1          # above any pid: nothing is signalled
    children, clients = {pid: ours}, {ours: pid}
    theirs.close()             # the JVM ended the client ...
    [(key, _)] = selector.select(timeout=5)
    python_zygote._child_exited(pid, 0, children, clients, selector)   # ... as its runner exited
    python_zygote._client_gone(key.fileobj, children, clients, selector)
    assert children == {} and clients == {} and selector.get_map() == {}
    selector.close()


def test_without_a_zygote_the_client_is_the_interpreter_itself(zygote, tmp_path):
    zygote.process.kill()
    zygote.process.wait(timeout=30)
    jvm = FakeJvm(tmp_path)
    client = jvm.start_runner(zygote.client, str(tmp_path))
    conn, runner_pid = jvm.accept_runner()
    assert runner_pid == client.pid          # exec'd: the runner is the client's own process
    conn.close()
    client.communicate(timeout=60)
    # and every other use of Python goes straight to the interpreter
    done = subprocess.run([zygote.client, "-c", "import sys; print(sys.executable)"], capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.strip() == sys.executable


# PySpark reads PYSPARK_ENABLE_NAMEDTUPLE_PATCH when it is imported, SeaTide's failpoints their
# points (a runner armed otherwise would never meet its points)
@pytest.mark.parametrize("name, value", [("PYSPARK_ENABLE_NAMEDTUPLE_PATCH", "1"),
                                         ("SEATIDE_FAILPOINTS", "source.fake.read_partition=raise")])
def test_a_client_whose_import_time_settings_differ_gets_the_interpreter_itself(zygote, tmp_path, name, value):
    """The zygote's imports were made without the setting, so a process that sets it must start afresh."""
    assert name in python_zygote.IMPORT_TIME_ENV
    jvm = FakeJvm(tmp_path)
    client = jvm.start_runner(zygote.client, str(tmp_path), **{name: value})
    conn, runner_pid = jvm.accept_runner()
    assert runner_pid == client.pid          # refused by the zygote: exec'd the interpreter
    assert psutil.Process(zygote.process.pid).children() == []
    conn.close()
    client.communicate(timeout=60)


def test_a_request_carries_arguments_and_environment_byte_for_byte_and_a_malformed_one_is_refused():
    """The client sends NUL-separated bytes (no argument or variable can hold a NUL)."""
    data = b"\0".join([b"pyspark.daemon", b"/w\xff", b"18", b"2,13", b"", b"7:1024:4096,4:-1:-1", b"2", b"",
                       b"a=b", b"X=1=2", b"B=\xfe", b"E="])
    request = zygote_request.decode_request(data)
    assert request == zygote_request.Request(
        module="pyspark.daemon", cwd=os.fsdecode(b"/w\xff"), args=["", "a=b"],
        env={"X": "1=2", "B": os.fsdecode(b"\xfe"), "E": ""}, umask=0o22, ignored=frozenset({2, 13}),
        blocked=frozenset(), limits={7: (1024, 4096), 4: (-1, -1)})
    assert os.fsencode(request.env["B"]) == b"\xfe"
    for malformed in (b"", b"m\0/", b"m\0/\0" b"18\0\0\0\0x", b"m\0/\x0018\0\0\0\0\x003\0a",
                      b"m\0/\x0018\0\0\0\0\x000\0NOEQUALS", b"m\0/\x0018\0\0\0" b"7:1\x000"):
        with pytest.raises(ValueError):
            zygote_request.decode_request(malformed)


def test_the_client_forks_the_modules_the_zygote_forks():
    """zygote_client.py is copied into an executable, not imported: its list is checked here."""
    source = os.path.join(os.path.dirname(python_zygote.__file__), "zygote_client.py")
    with open(source) as handle:
        line = next(line for line in handle if line.startswith("FORKED_MODULES = "))
    assert ast.literal_eval(line.split("=", 1)[1].strip()) == python_zygote.FORKED_MODULES
    assert "pyspark.daemon" in python_zygote.FORKED_MODULES


def test_the_zygote_exits_when_its_starter_exits(tmp_path):
    """Its starter ends normally, once the zygote accepts: the zygote goes too."""
    starter = subprocess.run(
        [sys.executable, "-c", "import os, sys\n"
         "from seatide.runtime import python_zygote\n"
         "from seatide.testing.cluster import wait_for\n"
         "zygote = python_zygote.spawn(sys.argv[1])\n"
         "wait_for(lambda: os.path.exists(os.path.join(sys.argv[1], 'zygote.sock')), 60, message='accepting')\n"
         "print(zygote.process.pid)\n", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert starter.returncode == 0, starter.stderr
    zygote = psutil.Process(int(starter.stdout))
    wait_for(lambda: _gone(zygote), 30, message="the zygote gone with its starter")


@pytest.mark.spark
def test_the_sessions_streaming_queries_get_their_runner_from_the_zygote(spark, tmp_path):
    """The shared session is local: its Python source's runner is a child of the zygote."""
    from seatide.connectors.fake.layout import SplitLayout
    from seatide.connectors.fake.split_stream import SOURCE_NAME, FakeSplitSource, stream_options
    from seatide.plugin.base import use_python_data_source

    zygote = python_zygote.started()
    assert zygote is not None and os.environ["PYSPARK_PYTHON"] == zygote.client
    wait_for(lambda: os.path.exists(os.path.join(os.path.dirname(zygote.client), "zygote.sock")), 60,
             message="the zygote accepting")
    use_python_data_source(spark, FakeSplitSource)
    layout = SplitLayout(readers=1, rows_per_reader=4, splits_per_reader=2, unit_rows=1)
    options = stream_options(layout, max_rows=2, unbounded=False, interval_ms=0, partitions=1)
    forked, rows = [], []

    def write(frame, batch_id):
        forked.append(len(psutil.Process(zygote.process.pid).children()))
        rows.append(frame.count())

    query = (spark.readStream.format(SOURCE_NAME).options(**options).load().writeStream.foreachBatch(write)
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    query.awaitTermination()
    assert sum(rows) == 4
    assert forked and min(forked) >= 1, (forked, _zygote_state(zygote))   # the runner serving the query was forked


@pytest.mark.spark
def test_the_sessions_python_worker_daemon_is_forked_by_the_zygote(spark):
    """A Python UDF runs in a worker of Spark's daemon, which the zygote forked: its client,
    a child of the JVM, waits on it instead of having become the interpreter."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    zygote = python_zygote.started()
    wait_for(lambda: os.path.exists(os.path.join(os.path.dirname(zygote.client), "zygote.sock")), 60,
             message="the zygote accepting")
    plus_one = F.udf(lambda v: v + 1, LongType())
    assert [r[0] for r in spark.range(3).select(plus_one("id")).collect()] == [1, 2, 3]
    jvm = psutil.Process(spark.sparkContext._gateway.proc.pid)

    def command_lines() -> list[list[str]]:
        lines = []
        for child in jvm.children():       # some have ended (Hadoop's readlink, earlier runners)
            try:
                lines.append(child.cmdline())
            except psutil.Error:
                pass
        return lines

    clients = [line for line in command_lines() if line[-3:] == ["-m", "pyspark.daemon", "pyspark.worker"]]
    assert clients, command_lines()
    assert all(zygote.client in line for line in clients), (clients, _zygote_state(zygote))
    assert psutil.Process(zygote.process.pid).children(), "the zygote forked no daemon"


@pytest.mark.spark
def test_the_sessions_jvm_runs_its_driver_side_python_through_the_zygote_too(spark):
    """Spark starts the lookup of Python data sources (a daemon, once per session) with
    PYSPARK_DRIVER_PYTHON, not PYSPARK_PYTHON: it was the interpreter itself, 0.3 s of CPU a
    session instead of a fork."""
    zygote = python_zygote.started()
    jvm = psutil.Process(spark.sparkContext._gateway.proc.pid)
    env = jvm.environ()
    assert env["PYSPARK_DRIVER_PYTHON"] == env["PYSPARK_PYTHON"] == zygote.client


# A process that starts a zygote as a driver does (a real session, its zygote started from a
# thread that then ends), runs a Python UDF that blocks, as a source blocked on its database
# does, and reports the worker's pid in MARKER.
BLOCKED_STARTER = """
import os, sys, threading, time
from seatide.runtime import python_zygote
from seatide.runtime.session import build_session
from seatide.testing.cluster import wait_for

marker = sys.argv[1]
started = []
thread = threading.Thread(target=lambda: started.append(build_session("blocked", {"spark.master": "local[1]"})))
thread.start()
thread.join()
spark = started[0]
zygote = python_zygote.started()
wait_for(lambda: os.path.exists(os.path.join(os.path.dirname(zygote.client), "zygote.sock")), 60,
         message="the zygote accepting")
print("zygote", zygote.process.pid, flush=True)

from pyspark.sql import functions as F
from pyspark.sql.types import LongType

def blocked(value):
    with open(marker + ".new", "w") as out:
        out.write(str(os.getpid()))
    os.rename(marker + ".new", marker)
    time.sleep(3600)
    return value

spark.range(1).select(F.udf(blocked, LongType())("id")).collect()
"""


def _gone(process: psutil.Process) -> bool:
    """Whether ``process`` has exited: reaped, or a zombie (it may be reaped between two looks)."""
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.cluster
def test_a_zygote_and_everything_it_forked_die_with_the_process_that_started_it(tmp_path):
    """SIGKILL the starter: the zygote goes, so do Spark's daemon it forked and the daemon's
    worker, even one busy in a UDF that never reads from the JVM again."""
    marker = str(tmp_path / "worker.pid")
    starter = subprocess.Popen([sys.executable, "-c", BLOCKED_STARTER, marker], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    left: list[psutil.Process] = []
    try:
        line = starter.stdout.readline()
        assert line.startswith("zygote "), line
        zygote = psutil.Process(int(line.split()[1]))
        worker_pid = int(wait_for(lambda: os.path.exists(marker) and open(marker).read(), 180,
                                  message="the UDF running in a worker"))
        left = [zygote, *zygote.children(recursive=True)]
        assert worker_pid in {p.pid for p in left}, "the UDF's worker was not forked through the zygote"
        assert zygote.ppid() == starter.pid
        starter.kill()
        starter.wait(timeout=30)
        try:
            wait_for(lambda: all(_gone(p) for p in left), 60, message="the zygote and its descendants gone")
        except AssertionError:
            alive = [f"{p.pid} {' '.join(p.cmdline()[-3:])}" for p in left if not _gone(p)]
            raise AssertionError(f"outlived the process that started them: {alive}") from None
    finally:
        starter.kill()
        for process in left:
            if not _gone(process):
                process.kill()
