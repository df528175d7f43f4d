"""What a job's code starts lives as a fresh process's would, what the zygote cannot serve runs
afresh, and nothing a client does stalls or breaks the zygote (runtime/python_zygote.py, second
outside review: findings 2, 3, 5-10).

As in test_zygote_fidelity.py: a probe run afresh and through the zygote's client with one
request must report and exit alike."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import zipfile

import pytest

from seatide.runtime import python_zygote
from seatide.testing.cluster import wait_for
from tests.runtime.test_python_zygote import SPARK_WORKER_ENV
from tests.runtime.test_zygote_fidelity import PROBE, _both, _facts, probe  # noqa: F401  (probe: a fixture)


@pytest.fixture
def zygote(tmp_path, monkeypatch, request):
    """The zygote of a driver whose environment adds ``request.param``, if any."""
    for name, value in getattr(request, "param", {}).items():
        monkeypatch.setenv(name, value)
    zygote = python_zygote.spawn(str(tmp_path))
    wait_for(lambda: os.path.exists(tmp_path / "zygote.sock"), 60, message="the zygote accepting")
    yield zygote
    zygote.process.terminate()
    zygote.process.wait(timeout=30)


def _alone(probe, python: str, how: str, **extra_env: str) -> subprocess.CompletedProcess:
    """The probe run once, as in _both, with ``python`` (the fresh interpreter or the client), its
    standard input a pipe, as the JVM gives it."""
    _client, job = probe
    (job / "zygote_probe.py").write_text(PROBE)
    env = {**os.environ, **SPARK_WORKER_ENV, **extra_env}
    env.pop("PYTHONPATH", None)
    return subprocess.run([python, "-m", "zygote_probe", *how.split()], cwd=job, env=env, input="",
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("how", ["helper", "double_fork"])
def test_a_jobs_detached_helper_outlives_the_process_that_started_it(probe, zygote, tmp_path, how):
    """A helper a job starts in its own session (Popen with setsid), or a daemon made by a double
    fork, lives on after the job's process exits: it has no death signal in a fresh process, and
    must not get the one the zygote gives a daemon's workers, which survives exec."""
    client, _job = probe
    for python, parent in ((sys.executable, os.getpid()), (client, zygote.process.pid)):
        mark = tmp_path / f"{how}-{parent}"
        done = _alone(probe, python, f"{how} {mark}")
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"{parent}\n", "the zygote did not fork the probe"
        wait_for(mark.exists, 30, message=f"the {how} of {python} to write its mark once its starter exited")


def test_a_job_started_in_a_deleted_directory_runs_as_a_fresh_interpreter_does(probe, zygote, tmp_path):
    """Its directory gone (removed by another process), a fresh interpreter still starts: the
    client must become it, not fail as it names its directory to the zygote."""
    client, job = probe
    (job / "zygote_probe.py").write_text(PROBE)
    gone = tmp_path / "gone"
    env = {**os.environ, **SPARK_WORKER_ENV, "PYTHONPATH": str(job)}
    runs = []
    for python in (sys.executable, client):
        gone.mkdir()
        runs.append(subprocess.run([python, "-m", "zygote_probe", "exit_4"], cwd=gone, env=env,
                                   preexec_fn=lambda: os.rmdir(os.getcwd()), capture_output=True, text=True,
                                   timeout=120))
    fresh, forked = runs
    assert fresh.returncode == 4, fresh.stderr
    assert (forked.returncode, forked.stderr) == (fresh.returncode, fresh.stderr)


def test_a_client_that_sends_nothing_does_not_stall_the_others(probe, zygote):
    """One connection that says nothing (a client stopped between connect and send) held the
    zygote's only thread: every later client waited for good."""
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.connect(os.path.join(os.path.dirname(zygote.client), "zygote.sock"))
    try:
        client, job = probe
        (job / "zygote_probe.py").write_text(PROBE)
        env = {**os.environ, **SPARK_WORKER_ENV}
        env.pop("PYTHONPATH", None)
        done = subprocess.run([client, "-m", "zygote_probe", "facts"], cwd=job, env=env, capture_output=True,
                              text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["parent"] == zygote.process.pid, "the next request was not forked"
        assert silent.recv(4) == b"", "the silent client was not hung up on (it starts the interpreter)"
    finally:
        silent.close()


def test_a_driver_without_standard_output_still_gets_its_processes_forked(tmp_path):
    """A driver started with its standard output closed (``>&-``, a supervisor): the zygote's
    sys.stdout was None and its flush before each fork ended it, so every process started afresh."""
    script = ("import json, os, subprocess, sys\n"
              "from seatide.runtime import python_zygote\n"
              "from seatide.testing.cluster import wait_for\n"
              "zygote = python_zygote.spawn(sys.argv[1])\n"
              "wait_for(lambda: os.path.exists(os.path.join(sys.argv[1], 'zygote.sock')), 60)\n"
              "text = open(zygote.client).read()\n"
              "text = text.replace('FORKED_MODULES = (', 'FORKED_MODULES = (\"zygote_probe\", ', 1)\n"
              "client = os.path.join(sys.argv[1], 'probe-python')\n"
              "open(client, 'w').write(text)\n"
              "os.chmod(client, 0o755)\n"
              f"env = {{**os.environ, **{SPARK_WORKER_ENV!r}}}\n"
              "env.pop('PYTHONPATH', None)\n"
              "done = subprocess.run([client, '-m', 'zygote_probe', 'facts'], cwd=sys.argv[2], env=env,\n"
              "                      capture_output=True, text=True, timeout=60)\n"
              "facts = json.loads(done.stdout)\n"
              "print(facts['parent'] == zygote.process.pid, file=sys.stderr)\n")
    job = tmp_path / "job"
    job.mkdir()
    (job / "zygote_probe.py").write_text(PROBE)
    home = tmp_path / "zygote"
    home.mkdir()
    closed_stdout = 'exec "$0" -c "$1" "$2" "$3" >&-'
    done = subprocess.run(["sh", "-c", closed_stdout, sys.executable, script, str(home), str(job)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "True", done.stderr


@pytest.mark.parametrize("zygote", [{"PYTHONHASHSEED": "random"}, {"PYTHONHASHSEED": ""}], indirect=True,
                         ids=["random", "empty"])
def test_a_hash_seed_left_random_gives_each_process_its_own_secret(probe, zygote):
    """PySpark passes the driver's PYTHONHASHSEED on: "random" (or empty) gives every fresh
    process a secret of its own, where the zygote's children all shared the zygote's."""
    seed = os.environ["PYTHONHASHSEED"]
    runs = [_both(probe, "facts", PYTHONHASHSEED=seed) for _ in range(3)]
    fresh = {json.loads(f.stdout)["hash"] for f, _ in runs}
    forked = {json.loads(g.stdout)["hash"] for _, g in runs}
    assert len(fresh) == 3
    assert len(forked) == 3, "forked processes share one hash secret"


def test_arrows_settings_in_a_jobs_environment_reach_its_workers(probe, zygote, tmp_path):
    """spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL reaches every Python process Spark starts; the
    zygote imports pyarrow before forking a worker daemon, with the driver's settings."""
    env = {**os.environ, **SPARK_WORKER_ENV}
    env.pop("PYTHONPATH", None)
    subprocess.run([zygote.client, "-m", "pyspark.daemon", "pyspark.worker"], env=env, cwd=tmp_path,
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=120)    # no JVM: it exits at once
    with open(f"/proc/{zygote.process.pid}/maps") as maps:
        assert "pyarrow" in maps.read(), "the zygote did not import pyarrow for a worker daemon"
    fresh, forked = _both(probe, "arrow", ARROW_DEFAULT_MEMORY_POOL="system")
    assert fresh.stdout == "system\n", fresh.stderr
    assert forked.stdout == fresh.stdout, forked.stderr


def test_an_archive_in_sparks_home_that_spark_does_not_name_is_a_jobs_own(probe, zygote, tmp_path):
    """Spark puts its pyspark and py4j zips and its core jar on the path; any other archive under
    its home (a sitecustomize in $SPARK_HOME/python/lib/extra.zip) is code a fresh process runs."""
    home = tmp_path / "spark"
    (home / "python" / "lib").mkdir(parents=True)
    extra = home / "python" / "lib" / "extra.zip"
    with zipfile.ZipFile(extra, "w") as archive:
        archive.writestr("sitecustomize.py", "import os\nos.environ['SITE_RAN'] = 'yes'\n")
    fresh, forked = _facts(probe, zygote, path=[str(extra)], SPARK_HOME=str(home))
    assert fresh["site"] == "yes"
    assert forked["site"] == fresh["site"]


def test_a_forked_process_was_started_with_the_arguments_a_fresh_one_has(probe, zygote):
    fresh, forked = _both(probe, "started_as")
    assert fresh.returncode == 0, fresh.stderr
    assert forked.stdout == fresh.stdout


def test_a_forked_process_has_standard_streams_made_for_its_own_descriptors(probe, zygote):
    """The interpreter makes its streams for the descriptors it starts with: a pipe for standard
    input is not seekable, where the zygote's /dev/null was (the JVM hands a worker pipes); a
    terminal would be line-buffered, a pipe is not."""
    client, _job = probe
    fresh = _alone(probe, sys.executable, "streams").stdout.splitlines()
    forked = _alone(probe, client, "streams").stdout.splitlines()
    assert forked[1] == str(zygote.process.pid), "the zygote did not fork the probe"
    assert json.loads(fresh[0])[0][-2] is False, "a pipe is not seekable"
    assert forked[0] == fresh[0]


DAEMON = """
import ctypes, json, os
from seatide.runtime import zygote_child

def death_signal():
    value = ctypes.c_int()
    ctypes.CDLL(None).prctl(2, ctypes.byref(value))     # PR_GET_PDEATHSIG
    return value.value

zygote_child._workers_die_with_their_daemon()     # as in a forked pyspark.daemon
out_r, out_w = os.pipe()
worker = os.fork()
if worker == 0:
    mine = death_signal()
    job = os.fork()                                 # what the job's code in the worker forks
    if job == 0:
        os.write(out_w, json.dumps([mine, death_signal()]).encode())
        os._exit(0)
    os.waitpid(job, 0)
    os._exit(0)
os.waitpid(worker, 0)
print(os.read(out_r, 100).decode())
"""


def test_a_daemons_workers_die_with_it_and_what_they_fork_has_no_death_signal():
    """A worker busy in a UDF must die with its daemon (SIGKILL as its parent exits); a process
    the worker's job code forks has no death signal, as under a fresh daemon."""
    done = subprocess.run([sys.executable, "-c", DAEMON], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [9, 0]
