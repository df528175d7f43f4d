"""A Python process that has imported PySpark, and forks Spark's Python processes on demand.

Spark starts fresh interpreters on the driver (with a local master, the executors too):

* per streaming query with a Python data source, ``python -m
  pyspark.sql.streaming.python_streaming_source_runner`` (no daemon, no reuse);
* per kind of Python work, a daemon, ``python -m pyspark.daemon <worker module>``, which forks
  a worker per task: one for planning a Python data source (``create_data_source``,
  ``plan_data_source_read``, ``lookup_data_sources``), one for reading it and running UDFs
  (``pyspark.worker``), and so on. Each daemon imports PySpark first, and each worker it forks
  imports its module after the fork, then what its task needs: a SeaTide data source's modules
  and database client, pandas.

Those imports cost 0.2-0.9 s of CPU per process on this 2-core machine, several times per
attempt, on the path from a query's start to its first batch. With a zygote, Spark runs
``zygote_client.py`` instead of Python (``PYSPARK_PYTHON``). The client hands its standard
streams, arguments, environment and working directory to this process, which forks: the child
takes them over and runs the module with its imports already done, and a daemon's workers
inherit them too: PySpark's, made as the zygote starts, and SeaTide's data sources with their
database clients, and pandas, made before the first fork that needs them (zygote_imports.py).
For anything else, or when the zygote cannot be reached, the client execs the real
interpreter: the zygote only ever saves time.

Rules that keep a forked process what a fresh one would be:

* the zygote imports modules only (what the children would import), starts no Python thread
  and opens nothing a child could inherit but its listening socket, which the child closes (the
  libraries it imports start native threads of their own, jemalloc's background thread among
  them, as they do in a fresh process: a fork copies none of them).
  It freezes its objects before each fork (``gc.freeze``), so the garbage collections of a
  child (Spark's daemon has a reused worker collect after every task) leave them out;
* the child takes the environment, directory and path (``sys.path``) a fresh ``python -m``
  started by the JVM would have, re-reads the time zone, makes its standard streams for the
  client's descriptors (a pipe is not seekable, a terminal is line-buffered), and takes what the
  client inherited from the JVM and sent in its request (zygote_request.py): ignored and blocked
  signals, umask, resource limits. What it cannot take is refused, and its client starts the
  real interpreter (zygote_fit.py): settings the interpreter reads as it starts (the hash seed,
  unbuffered streams) or modules read as they are imported (``IMPORT_TIME_ENV``), when they
  differ from the zygote's, and a hash seed left random; a hard resource limit above the
  zygote's; and a path on which a job brings its own Python code (anything but Spark's archives
  and SeaTide's source). Refusal is decided before the zygote imports anything for a request,
  and a failed accept or fork, or a client that sends no request, refuses that request alone. A
  job that can bring its own Python where no request shows it (Spark adds its --py-files to the
  path after the fork) gets no zygote at all (zygote_choice.py);
* it ends as the interpreter ends: its threads are waited for, its exit functions run, a
  ``sys.exit`` message is printed, an interrupt ends it by SIGINT; the client exits with its
  status, or is killed by the signal that killed it;
* lifetimes: nothing the zygote's own purposes start outlives the process that started the
  zygote (its starter, a driver). The zygote exits when its starter has exited, which a pidfd of
  the starter tells it (``PR_SET_PDEATHSIG`` would follow the starter's *thread*, and a driver
  starts Spark from a thread that may end; a pipe would stay open while anything the starter
  forked holds its end). A child dies with the zygote, and a daemon's workers, which it forks
  from its main thread, die with the daemon (``PR_SET_PDEATHSIG``): a worker busy in a UDF or
  blocked on a database never reads the end of its JVM, so nothing else would end it. Nothing
  else gets a death signal, which would survive exec: what a job's code forks (in a worker or a
  runner: a helper in its own session, a double-fork daemon, a fork from another thread) lives
  on as a fresh process's would. A child whose client disconnects (the JVM ended the process it
  started) gets SIGTERM, on which a daemon ends its workers, as it would have; the client exits
  with the child's status.

Known differences (review of 94805da): the BLAS thread pool is sized as numpy loaded in the
zygote (Spark gives OMP_NUM_THREADS to its workers alone, not to runners and planners; F4), and
the child ends by ``os._exit`` after its exit functions, without the interpreter's teardown of
modules (``__del__`` of module globals, unclosed files' flush; F9).

Used only when every executor is in the driver's JVM (a local master): elsewhere, Spark
would send the client's path to executors on other hosts as their Python.
"""

from __future__ import annotations

import atexit
import errno
import gc
import logging
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

from seatide.runtime import zygote_child, zygote_fit, zygote_imports, zygote_request

log = logging.getLogger(__name__)

# What Spark starts as fresh processes: a streaming query's runner, and the daemons. Kept
# the same as zygote_client.py's list (tests/runtime/test_python_zygote.py checks it).
FORKED_MODULES = ("pyspark.sql.streaming.python_streaming_source_runner", "pyspark.daemon")
# Read by the modules the zygote imports (zygote_imports.py): a forked child sees the zygote's values.
IMPORT_TIME_ENV = zygote_imports.IMPORT_TIME_ENV
# Seconds a connected client has to send its request, which it writes as it connects (microseconds).
REQUEST_TIMEOUT = 2.0

def _watch(starter: int) -> int:
    """A pidfd of ``starter``, our parent, readable once it has exited; exit now if it has."""
    try:
        pidfd = os.pidfd_open(starter)
    except ProcessLookupError:
        os._exit(0)
    if os.getppid() != starter:     # it exited before we looked, and its pid was reused
        os._exit(0)
    return pidfd


def serve(path: str, starter: int) -> None:
    """Listen on ``path`` (a Unix socket) and fork a runner per request, until the process
    ``starter`` has exited."""
    starter_fd = _watch(starter)
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # a ^C for `seatide run` is the driver's to handle
    interpreter = zygote_fit.interpreter_path()
    zygote_imports.import_all(FORKED_MODULES, required=True)   # what each child would import: the point of the zygote
    zygote_imports.import_all(zygote_imports.AT_START)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)     # wakes the selector through the pipe
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".new")
    listener.listen(16)
    os.rename(path + ".new", path)          # clients connect only once we accept
    children: dict[int, socket.socket] = {}
    clients: dict[socket.socket, int] = {}
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_r, selectors.EVENT_READ, "reap")
    selector.register(starter_fd, selectors.EVENT_READ, "starter")
    spare = os.open(os.devnull, os.O_RDONLY)     # closed to accept a client when out of descriptors
    # Accepted clients whose request is yet to come, with the time by which it must have. One that
    # says nothing (stopped, stuck) holds no one up, and is hung up on before anything is forked:
    # it starts the interpreter itself.
    pending: dict[socket.socket, float] = {}
    while True:
        soonest = min(pending.values(), default=None)
        for key, _ in selector.select(None if soonest is None else max(0.0, soonest - time.monotonic())):
            if key.data == "starter":       # the starter is gone; our children follow us
                os._exit(0)
            if key.data == "accept":
                spare = _accept(listener, spare, pending, selector)
            elif key.data == "request":
                selector.unregister(key.fileobj)
                del pending[key.fileobj]
                spare = _answer(key.fileobj, spare, interpreter, children, clients, selector,
                                [listener.fileno(), wake_r, wake_w, starter_fd, selector.fileno(),
                                 *(conn.fileno() for conn in pending)])
            elif key.data == "reap":
                os.read(wake_r, 512)
                _reap(children, clients, selector)
            else:
                _client_gone(key.fileobj, children, clients, selector)
        for conn in [conn for conn, deadline in pending.items() if deadline <= time.monotonic()]:
            selector.unregister(conn)
            del pending[conn]
            conn.close()


def _accept(listener, spare: int, pending: dict, selector) -> int:
    """Take a client, whose request is read once it has come (``_answer``); or hang up on it when
    no descriptor is left, so that it starts the interpreter. Returns the spare descriptor."""
    try:
        conn, _addr = listener.accept()
    except OSError as exc:
        if exc.errno not in (errno.EMFILE, errno.ENFILE):
            return spare
        # The client waits in the backlog, and the listener stays readable: take it with the
        # spare descriptor and hang up, so that it starts the interpreter.
        os.close(spare)
        try:
            listener.accept()[0].close()
        except OSError:
            pass
        return os.open(os.devnull, os.O_RDONLY)
    pending[conn] = time.monotonic() + REQUEST_TIMEOUT
    selector.register(conn, selectors.EVENT_READ, "request")
    return spare


def _answer(conn, spare: int, interpreter: list[str], children: dict, clients: dict, selector,
            closing: list[int]) -> int:
    """Serve one client whose request has come: fork its process, or answer nothing, so that it
    starts the interpreter itself. A failure here is that request's alone (a fork refused at the
    pid limit, a client gone): the zygote and its children go on. Returns the spare descriptor."""
    conn.settimeout(REQUEST_TIMEOUT)        # the rest of a request that came in pieces
    try:
        request, fds = zygote_request.read_request(conn)
    except (ConnectionError, ValueError, OSError):
        conn.close()
        return spare
    conn.settimeout(None)
    try:
        pid = _fork_for(request, fds, interpreter, [*closing, spare, *(c.fileno() for c in clients), conn.fileno()])
    finally:
        for fd in fds:
            os.close(fd)
    if pid is None:                 # no status: the client starts the interpreter itself
        conn.close()
        return spare
    try:
        conn.sendall(zygote_request.STATUS.pack(pid))
    except OSError:     # the JVM ended the client already: its runner goes too
        conn.close()
        _signal(pid, signal.SIGTERM)
        return spare
    children[pid], clients[conn] = conn, pid
    selector.register(conn, selectors.EVENT_READ, "client")
    return spare


def _fork_for(request: zygote_request.Request, fds: list[int], interpreter: list[str], closing: list[int]) -> int | None:
    """The pid of the child forked to be ``request``'s process, or None if it was refused or the
    fork failed. Refused before importing anything for it: a refused request pays no imports."""
    refused = zygote_fit.refusal(request, interpreter)
    if not refused:
        zygote_imports.before_fork(request.module, request.args)
        refused = zygote_fit.shadowed(request.cwd, request.env, interpreter)    # by what was just imported
    if refused:
        log.debug("python zygote: refused %s: %s", request.module, refused)
        return None
    # Spark's daemon has a reused worker collect its garbage after each task: a full
    # collection walked every object imported here (20 ms of CPU with PySpark alone,
    # 60 with pandas and the clients). Frozen, they are left out of the children's
    # collections (gc.freeze, as Python's documentation advises before a fork).
    gc.freeze()
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:      # None: the driver started us with that stream closed
            stream.flush()
    zygote = os.getpid()
    try:
        pid = os.fork()
    except OSError as exc:          # EAGAIN at the pid limit, ENOMEM: Spark's daemon would fail only this one
        log.debug("python zygote: no fork for %s: %s", request.module, exc)
        return None
    if pid == 0:
        zygote_child.run(request, fds, zygote, closing, interpreter)
    return pid


def _reap(children: dict, clients: dict, selector) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _child_exited(pid, os.waitstatus_to_exitcode(status), children, clients, selector)


def _child_exited(pid: int, code: int, children: dict, clients: dict, selector) -> None:
    """Tell the child's client how it ended, and forget both."""
    conn = children.pop(pid, None)
    if conn is None:
        return
    clients.pop(conn, None)
    selector.unregister(conn)
    try:
        conn.sendall(zygote_request.STATUS.pack(code))
    except OSError:
        pass
    conn.close()


def _client_gone(conn, children: dict, clients: dict, selector) -> None:
    """A client spoke or hung up: the JVM ended it, so its runner goes too (a daemon ends its
    workers on SIGTERM). One round of events can hold both a child's exit and its client's
    hang-up; when the exit came first the client is already forgotten. Unregistering it again
    raised (ValueError: the socket is closed) and ended the zygote, so every later Spark
    Python process of that driver started from scratch."""
    pid = clients.pop(conn, None)
    if pid is None:
        return
    selector.unregister(conn)
    conn.close()
    if pid in children:
        del children[pid]
        _signal(pid, signal.SIGTERM)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


class Zygote(NamedTuple):
    client: str                     # the executable to use as PYSPARK_PYTHON
    process: subprocess.Popen       # SIGTERM or SIGKILL it to stop it and all it forked


_this_process: Zygote | None = None
_unusable = False          # the client could not run here: Spark gets the interpreter itself


def start() -> str | None:
    """Start this process's zygote (once) and return its client, to use as ``PYSPARK_PYTHON``;
    None if the client cannot run here (then no zygote is used).

    The client exists at once and starts the real interpreter until the zygote accepts
    (after its imports, 0.4 s), so a session may be built right away."""
    global _this_process, _unusable
    if _this_process is None and not _unusable:
        directory = tempfile.mkdtemp(prefix="seatide-zygote-")
        atexit.register(shutil.rmtree, directory, True)
        _this_process = spawn(directory)
        _unusable = _this_process is None
        if _this_process is not None:
            log.debug("python zygote pid %s, client %s", _this_process.process.pid, _this_process.client)
    return _this_process.client if _this_process is not None else None


def started() -> Zygote | None:
    return _this_process


def stop() -> None:
    """Stop this process's zygote, and so all it forked, and wait for it (else it exits with
    this process). Its client then starts the real interpreter."""
    global _this_process
    if _this_process is not None:
        _this_process.process.terminate()
        _this_process.process.wait(timeout=60)
        _this_process = None


def spawn(directory: str) -> Zygote | None:
    """A zygote listening in ``directory``, and its client there; None if the client cannot run."""
    path, client = os.path.join(directory, "zygote.sock"), os.path.join(directory, "python")
    write_client(client, path)
    if not client_runs(client):
        return None
    # A standard stream the driver has closed is /dev/null in the zygote: closed, the zygote's
    # interpreter has no sys.stdout, and nor would any child, which writes to the client's.
    process = subprocess.Popen([sys.executable, "-m", __name__, path, str(os.getpid())], stdin=subprocess.DEVNULL,
                               stdout=_devnull_if_closed(1), stderr=_devnull_if_closed(2),
                               env=zygote_fit.zygote_env(dict(os.environ)))
    return Zygote(client, process)


def _devnull_if_closed(fd: int) -> int | None:
    try:
        os.fstat(fd)
    except OSError:
        return subprocess.DEVNULL
    return None


def client_runs(client: str) -> bool:
    """Whether ``client`` runs, and the interpreter it names: its ``#!`` line fails for an
    interpreter whose path holds a space or is too long, and a directory mounted noexec refuses
    it. Then every Python process Spark starts would fail: the zygote is not used (10 ms, once)."""
    try:
        done = subprocess.run([client, "-S", "-c", "pass"], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("python zygote not used: its client %s cannot run: %s", client, exc)
        return False
    if done.returncode != 0:
        log.warning("python zygote not used: its client %s exited with %s: %s", client, done.returncode,
                    done.stderr[-500:])
    return done.returncode == 0


def write_client(client: str, path: str) -> None:
    """The executable Spark runs as Python: a header naming the interpreter and the socket,
    then ``zygote_client.py``."""
    with open(os.path.join(os.path.dirname(__file__), "zygote_client.py")) as source:
        body = source.read()
    with open(client, "w") as out:
        out.write(f"#!{sys.executable} -S\nREAL_PYTHON = {sys.executable!r}\nSOCKET = {path!r}\n{body}")
    os.chmod(client, 0o755)


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
