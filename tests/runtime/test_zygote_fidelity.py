"""A process the zygote forks is the process a fresh interpreter would be (runtime/python_zygote.py).

Each test runs a probe module twice with one request (environment, directory, path): once as
Spark would have it run without a zygote, ``python -m zygote_probe``, and once through the
zygote's real client, taught to forward the probe as it forwards Spark's modules. What the two
report, and how they exit, must be the same; and the zygote must have forked the second, or it
saved nothing (the client falls back to the interpreter when the zygote refuses a request)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import pytest

from seatide.runtime import python_zygote
from tests.runtime.test_python_zygote import SPARK_WORKER_ENV, zygote  # noqa: F401  (zygote: a fixture)

PROBE = '''
import atexit, json, os, resource, signal, socket, sys, threading, time

def facts():
    import pymysql, psycopg, zoneinfo
    return {"parent": os.getppid(), "hash": hash("seatide"), "timezone": time.timezone,
            "tzname": list(time.tzname), "path": sys.path, "pymysql": pymysql.__file__,
            "psycopg": psycopg.__file__, "flags": list(sys.flags), "write_through": sys.stdout.write_through,
            "fds": sorted(os.listdir("/proc/self/fd"), key=int), "tzpath": list(zoneinfo.TZPATH),
            "umask": os.umask(0o22), "limits": [resource.getrlimit(getattr(resource, name))
                                                for name in sorted(dir(resource)) if name.startswith("RLIMIT_")],
            "signals": [str(signal.getsignal(n)) for n in range(1, signal.NSIG) if n not in (32, 33)],
            "blocked": sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])), "site": os.environ.get("SITE_RAN")}

def broken_pipe():
    ours, theirs = socket.socketpair()
    theirs.close()
    try:
        ours.sendall(b"x")
    except BrokenPipeError:
        sys.exit(3)

def fork_from_a_thread():
    """A job's own fork from a thread that ends before its child does."""
    pids = []
    def task():
        pid = os.fork()
        if pid == 0:
            time.sleep(0.5)
            os._exit(0)
        pids.append(pid)
    thread = threading.Thread(target=task)
    thread.start()
    thread.join()
    print("child", os.waitstatus_to_exitcode(os.waitpid(pids[0], 0)[1]), flush=True)

how = sys.argv[1]
if how == "facts":
    print(json.dumps(facts()), flush=True)
elif how == "os_exit":
    os._exit(7)
elif how == "sys_exit":
    sys.exit("leaving with a message")
elif how == "raise":
    raise RuntimeError("a failure")
elif how == "interrupt":
    raise KeyboardInterrupt
elif how == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
elif how == "atexit":
    atexit.register(print, "an exit function ran", flush=True)
elif how == "broken_pipe":
    broken_pipe()
elif how == "thread_fork":
    fork_from_a_thread()
elif how.startswith("exit_"):
    sys.exit(int(how[5:]))
elif how == "sleep_until":
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.05)
    print("done", flush=True)
elif how == "thread":
    threading.Thread(target=lambda: (time.sleep(0.3), print("a thread finished", flush=True))).start()
elif how == "helper":         # a job's detached helper, which writes its mark once we have exited
    import subprocess
    wait = f"while kill -0 {os.getpid()} 2>/dev/null; do sleep 0.05; done"
    subprocess.Popen(["sh", "-c", f"{wait}; echo lived > {sys.argv[2]}"],
                     preexec_fn=os.setsid, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    print(os.getppid(), flush=True)
elif how == "double_fork":    # a daemon made the classic way, from the main thread
    if os.fork() == 0:
        parent = os.getpid()
        if os.fork() == 0:
            while os.getppid() == parent:       # until its parent has exited
                time.sleep(0.05)
            open(sys.argv[2], "w").write("lived")
            os._exit(0)
        os._exit(0)
    os.wait()
    print(os.getppid(), flush=True)
elif how == "streams":
    print(json.dumps([[stream.name, stream.mode, stream.encoding, stream.errors, stream.line_buffering,
                       stream.write_through, type(stream.buffer).__name__, stream.seekable(), stream.isatty()]
                      for stream in (sys.stdin, sys.stdout, sys.stderr)]), flush=True)
    print(os.getppid(), flush=True)
elif how == "started_as":
    print(json.dumps([sys.orig_argv, sys.argv]), flush=True)
elif how == "arrow":
    import pyarrow
    print(pyarrow.default_memory_pool().backend_name, flush=True)
'''

@pytest.fixture
def probe(zygote, tmp_path):  # noqa: F811
    """A client that forwards ``zygote_probe`` to the zygote, and a job directory holding it."""
    with open(zygote.client) as handle:
        text = handle.read()
    client = str(tmp_path / "probe-python")
    with open(client, "w") as out:
        out.write(text.replace("FORKED_MODULES = (", 'FORKED_MODULES = ("zygote_probe", ', 1))
    os.chmod(client, 0o755)
    job = tmp_path / "job"
    job.mkdir()
    return client, job


def _run(python: str, how: str, cwd, env: dict, preexec_fn=None) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-m", "zygote_probe", *how.split()], cwd=str(cwd), env=env, capture_output=True,
                          text=True, timeout=120, preexec_fn=preexec_fn)


def _both(probe, how: str, cwd=None, path: list | None = None, preexec_fn=None, **extra_env: str):
    """The probe run afresh, then through the zygote, with one request: from its directory, which
    a fresh ``python -m`` puts first on its path (a job's own directory on PYTHONPATH is served
    by a fresh interpreter), as the JVM starts it (``preexec_fn``: the state a child inherits)."""
    client, job = probe
    env = {**os.environ, **SPARK_WORKER_ENV, **extra_env}
    if path:
        env["PYTHONPATH"] = os.pathsep.join(path)
    else:
        env.pop("PYTHONPATH", None)
    cwd = cwd or job
    (cwd / "zygote_probe.py").write_text(PROBE)
    return _run(sys.executable, how, cwd, env, preexec_fn), _run(client, how, cwd, env, preexec_fn)


def _facts(probe, zygote, **kwargs) -> tuple[dict, dict]:  # noqa: F811
    fresh, forked = _both(probe, "facts", **kwargs)
    assert fresh.returncode == 0 and forked.returncode == 0, (fresh.stderr, forked.stderr)
    return json.loads(fresh.stdout), json.loads(forked.stdout)


def test_a_forked_process_is_forked_and_hashes_strings_with_the_seed_its_request_sets(probe, zygote):  # noqa: F811
    """PySpark gives its workers PYTHONHASHSEED (the driver's, else 0): a forked child kept the
    zygote's random seed, so string hashes (portable_hash's partitions) changed with each driver."""
    fresh, forked = _facts(probe, zygote)
    assert forked["parent"] == zygote.process.pid, "the zygote did not fork the probe"
    assert forked["hash"] == fresh["hash"]


def _sparks_zips_and_seatides_source() -> list[str]:
    import pyspark
    import seatide

    lib = os.path.join(os.path.dirname(pyspark.__file__), "python", "lib")
    zips = sorted(os.path.join(lib, name) for name in os.listdir(lib) if name.endswith(".zip"))
    assert len(zips) == 2, zips
    return [*zips, os.path.dirname(os.path.dirname(seatide.__file__))]


def test_a_forked_process_starts_with_the_path_a_fresh_one_would(probe, zygote):  # noqa: F811
    """Its directory first, then the request's PYTHONPATH, then the interpreter's own."""
    fresh, forked = _facts(probe, zygote, path=_sparks_zips_and_seatides_source())
    assert forked["parent"] == zygote.process.pid
    assert forked["path"] == fresh["path"]


def test_a_forked_process_has_the_streams_flags_and_descriptors_a_fresh_one_would(probe, zygote):  # noqa: F811
    fresh, forked = _facts(probe, zygote)
    assert forked["parent"] == zygote.process.pid
    assert (forked["write_through"], forked["flags"]) == (fresh["write_through"], fresh["flags"])
    assert forked["fds"] == fresh["fds"]      # nothing of the zygote's left open


@pytest.mark.parametrize("zone", ["Asia/Tokyo", "America/New_York"])
def test_a_forked_process_keeps_time_in_the_zone_its_request_names(probe, zygote, zone):  # noqa: F811
    """TZ may differ between requests (and from the zygote's): ``time`` read it as the zygote started."""
    fresh, forked = _facts(probe, zygote, TZ=zone)
    assert forked["parent"] == zygote.process.pid
    assert (forked["timezone"], forked["tzname"]) == (fresh["timezone"], fresh["tzname"])


@pytest.mark.parametrize("how", ["os_exit", "sys_exit", "raise", "interrupt", "killed", "atexit", "thread",
                                 "exit_-1", "exit_-9", "exit_256"])
def test_a_forked_process_ends_as_a_fresh_one_would_and_its_client_exits_alike(probe, how):
    """The JVM sees the client's status: a fresh process's, whether it returned, called
    ``os._exit``, ``sys.exit`` with a message or a number (PySpark's runner ends failures with
    ``sys.exit(-1)``: status 255, not SIGHUP), raised, was interrupted or killed; and what a
    fresh one does as it ends (exit functions, waiting for its threads) is done."""
    fresh, forked = _both(probe, how)
    assert forked.returncode == fresh.returncode, (fresh.stderr, forked.stderr)
    assert forked.stdout == fresh.stdout
    assert _last_line(forked.stderr) == _last_line(fresh.stderr)


def _last_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[-1]


# A job's own copy of a module the zygote imports before forking, as a directory on its path, as
# a --py-files zip, and as a module in the directory Spark starts Python in.
def _package_dir(tmp_path, name: str) -> str:
    own = tmp_path / "own" / name
    own.mkdir(parents=True)
    (own / "__init__.py").write_text("VERSION = 'the job own'\n")
    return str(own.parent)


def _package_zip(tmp_path, name: str) -> str:
    path = tmp_path / "deps.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}/__init__.py", "VERSION = 'the job own'\n")
    return str(path)


@pytest.mark.parametrize("name, where", [("pymysql", "directory"), ("psycopg", "zip"), ("pymysql", "cwd")])
def test_a_job_that_brings_its_own_version_of_a_preloaded_module_imports_its_own(probe, zygote, tmp_path,  # noqa: F811
                                                                                name, where):
    cwd = None
    if where == "cwd":
        cwd = tmp_path / "cwd"
        cwd.mkdir()
        (cwd / f"{name}.py").write_text("VERSION = 'the job own'\n")
        path = []
    else:
        path = [_package_dir(tmp_path, name) if where == "directory" else _package_zip(tmp_path, name)]
    fresh, forked = _facts(probe, zygote, path=path, cwd=cwd)
    assert "own" in fresh[name] or "cwd" in fresh[name], fresh[name]
    assert forked[name] == fresh[name]


def test_pysparks_own_zips_and_seatides_source_on_the_path_leave_the_request_to_the_zygote(probe, zygote):  # noqa: F811
    """Spark puts its Home's pyspark.zip and py4j's zip first on every worker's path (a user's
    SPARK_HOME has them): the same PySpark the zygote imported, not a job's own."""
    _fresh, forked = _facts(probe, zygote, path=_sparks_zips_and_seatides_source())
    assert forked["parent"] == zygote.process.pid, "refused an ordinary SeaTide request"
