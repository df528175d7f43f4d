"""A forked process starts with what a fresh one inherits from the JVM, and a request the zygote
cannot serve still runs (runtime/python_zygote.py, review of 94805da: F1-F3, F5-F7, F10-F12).

As in test_zygote_fidelity.py: a probe run afresh and through the zygote's client with one
request must report and exit alike."""

from __future__ import annotations

import os
import resource
import select
import signal
import socket
import struct
import subprocess
import sys

import psutil
import pytest

from seatide.runtime import python_zygote
from seatide.testing.cluster import wait_for
from tests.runtime.test_python_zygote import SPARK_WORKER_ENV, zygote  # noqa: F401  (a fixture)
from tests.runtime.test_zygote_fidelity import PROBE, _both, _facts, probe  # noqa: F401  (probe: a fixture)


def _as_the_jvm_starts_python() -> None:
    """PySpark starts the JVM with SIGINT ignored, and the JVM raises its soft limit on open
    files to the hard one: every Python process it starts inherits both."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    os.umask(0o027)


@pytest.mark.parametrize("parent", [_as_the_jvm_starts_python, None], ids=["jvm", "plain"])
def test_a_forked_process_inherits_signals_limits_and_umask_as_a_fresh_one(probe, zygote, parent):  # noqa: F811
    """SIGPIPE ignored (a write to a closed peer raises BrokenPipeError, it does not kill),
    SIGINT ignored when its parent ignored it (a ^C for `seatide run` stops the driver
    gracefully, not every forked runner), the JVM's limits and umask rather than the driver's."""
    fresh, forked = _facts(probe, zygote, preexec_fn=parent)
    assert forked["parent"] == zygote.process.pid
    for fact in ("signals", "blocked", "limits", "umask"):
        assert forked[fact] == fresh[fact], fact
    fresh, forked = _both(probe, "broken_pipe", preexec_fn=parent)
    assert (forked.returncode, forked.stderr) == (fresh.returncode, fresh.stderr) == (3, "")


def test_a_child_a_job_forks_from_a_thread_outlives_that_thread(probe, zygote):  # noqa: F811
    fresh, forked = _both(probe, "thread_fork")
    assert fresh.stdout == "child 0\n"
    assert (forked.returncode, forked.stdout) == (fresh.returncode, fresh.stdout)


def test_a_jobs_own_python_code_on_its_path_runs_as_in_a_fresh_interpreter(probe, zygote, tmp_path):  # noqa: F811
    """A sitecustomize on the job's PYTHONPATH runs as the interpreter starts, which the zygote
    did long before: a request that brings its own code is served by a fresh interpreter."""
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import os\nos.environ['SITE_RAN'] = 'yes'\n")
    fresh, forked = _facts(probe, zygote, path=[str(own)])
    assert fresh["site"] == "yes"
    assert forked["site"] == fresh["site"]


def test_a_forked_process_searches_the_time_zones_its_request_names(probe, zygote, tmp_path):  # noqa: F811
    """zoneinfo reads PYTHONTZPATH as it is imported, in the zygote."""
    fresh, forked = _facts(probe, zygote, PYTHONTZPATH=str(tmp_path))
    assert fresh["tzpath"][0] == str(tmp_path)
    assert forked["tzpath"] == fresh["tzpath"]


_PIDS = "/sys/fs/cgroup/pids"


@pytest.mark.skipif(not os.access(_PIDS, os.W_OK), reason="needs a writable pids cgroup")
def test_a_fork_refused_at_the_pid_limit_fails_that_request_alone(probe, zygote, tmp_path):  # noqa: F811
    """fork() fails with EAGAIN at a pids cgroup's limit (a container's pids.max): a real one here.
    The request runs in a fresh interpreter; the zygote, and the runner it forked before, live on."""
    client, job = probe
    (job / "zygote_probe.py").write_text(PROBE)
    release = tmp_path / "release"
    env = {**os.environ, **SPARK_WORKER_ENV}
    env.pop("PYTHONPATH", None)
    running = subprocess.Popen([client, "-m", "zygote_probe", "sleep_until", str(release)], cwd=job, env=env,
                               stdout=subprocess.PIPE, text=True)
    wait_for(lambda: psutil.Process(zygote.process.pid).children(), 60, message="the first runner forked")
    group = os.path.join(_PIDS, f"seatide-zygote-test-{os.getpid()}")
    os.mkdir(group)
    try:
        tasks = len(os.listdir(f"/proc/{zygote.process.pid}/task"))
        with open(os.path.join(group, "pids.max"), "w") as out:
            out.write(str(tasks))
        with open(os.path.join(group, "cgroup.procs"), "w") as out:
            out.write(str(zygote.process.pid))
        fresh, forked = _both(probe, "exit_-1")
    finally:
        with open(os.path.join(_PIDS, "cgroup.procs"), "w") as out:
            out.write(str(zygote.process.pid))
        os.rmdir(group)
    assert (forked.returncode, forked.stderr) == (fresh.returncode, fresh.stderr) == (255, "")
    assert zygote.process.poll() is None, "the zygote died of a failed fork"
    release.touch()
    assert running.communicate(timeout=60)[0] == "done\n" and running.returncode == 0


def test_the_streams_of_a_malformed_request_are_closed(probe, zygote):  # noqa: F811
    """The JVM reads a process's output until its end: a pipe held open in the zygote, and so in
    every later child, never ends."""
    out_r, out_w = os.pipe()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(os.path.join(os.path.dirname(zygote.client), "zygote.sock"))
    socket.send_fds(conn, [struct.pack("!I", 5)], [0, out_w, out_w])
    conn.sendall(b"\0\0\0\0\0")        # too few fields
    os.close(out_w)
    assert conn.recv(4) == b""         # hung up on: the client would start the interpreter
    conn.close()
    readable, _, _ = select.select([out_r], [], [], 60)
    assert readable and os.read(out_r, 10) == b"", "the stream's write end lives on in the zygote"
    os.close(out_r)
    fresh, forked = _facts(probe, zygote)
    assert forked["parent"] == zygote.process.pid and forked["fds"] == fresh["fds"]


def test_a_refused_request_pays_no_imports_for_it(probe, zygote, tmp_path):  # noqa: F811
    """The zygote imports pandas before the first fork of a worker daemon: a refused request
    (the job's own pymysql on its path) must not wait for that, then start afresh anyway."""
    own = tmp_path / "own" / "pymysql"
    own.mkdir(parents=True)
    (own / "__init__.py").write_text("")
    env = {**os.environ, **SPARK_WORKER_ENV, "PYTHONPATH": str(own.parent)}
    done = subprocess.run([zygote.client, "-m", "pyspark.daemon", "pyspark.worker"], env=env, cwd=tmp_path,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    assert done.returncode != 0          # no JVM to talk to, afresh
    assert psutil.Process(zygote.process.pid).children() == []
    with open(f"/proc/{zygote.process.pid}/maps") as maps:
        assert "pandas/_libs" not in maps.read(), "imported pandas for a request it refused"


def test_a_client_that_cannot_run_is_not_used(tmp_path):
    """A client's #! line names the interpreter: a path with a space cannot be run that way.
    Spark then gets the interpreter itself, which runs, as a fresh one would."""
    spaced = tmp_path / "with space"          # a virtualenv there, made of links to ours
    (spaced / "bin").mkdir(parents=True)
    (spaced / "bin" / "python").symlink_to(sys.executable)
    (spaced / "lib").symlink_to(os.path.join(sys.prefix, "lib"))
    (spaced / "pyvenv.cfg").write_text(open(os.path.join(sys.prefix, "pyvenv.cfg")).read())
    python = spaced / "bin" / "python"
    script = ("import os, subprocess\n"
              "from seatide.runtime import session\n"
              "session.prepare_python_env('local[1]')\n"
              "done = subprocess.run([os.environ['PYSPARK_PYTHON'], '-c', 'print(6 * 7)'], capture_output=True,\n"
              "                      text=True)\n"
              "print(done.returncode, done.stdout.strip())\n")
    done = _run_script(str(python), script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "42"], done.stderr


def _run_script(python: str, script: str) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=120)
