"""The Python zygote's forked child (runtime/python_zygote.py): it becomes the process its client
would have started, runs its module as ``python -m`` would, and ends as the interpreter ends.

A fresh process's end is what Spark sees of it, through the client's status: so the child waits
for its threads and runs its exit functions (Py_RunMain's finalization), prints a ``sys.exit``
message, and dies by SIGINT after an unhandled interrupt. It then exits at once (``os._exit``):
tearing down the modules the zygote imported would only free memory the kernel frees anyway.
"""

from __future__ import annotations

import atexit
import ctypes
import io
import os
import resource
import runpy
import signal
import sys
import threading
import time
import traceback

from seatide.runtime import zygote_fit
from seatide.runtime.zygote_request import Request

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL("libc.so.6", use_errno=True)
_DAEMON = "pyspark.daemon"
_forking_pid = 0       # set just before each fork in a child: its children's parent
_forking_from_main = True
_served = 0            # the daemon the zygote forked: only its own forks (its workers) die with it


def _die_with_parent(parent: int) -> None:
    """SIGKILL this process when ``parent``, which forked it from its one thread, exits;
    at once if it already has (we were re-parented before asking)."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _before_fork() -> None:
    global _forking_pid, _forking_from_main
    _forking_pid = os.getpid()
    _forking_from_main = threading.get_ident() == threading.main_thread().ident


def _after_fork_in_child() -> None:
    # PR_SET_PDEATHSIG fires when the forking *thread* ends: a job's own fork from a worker
    # thread would lose its child with that thread, where a fresh process's child lives on. And
    # it survives exec: a job's helper (a double fork, Popen with setsid) forked by a worker, or
    # a worker's children, would die with their parent, which a fresh process's never do.
    if _forking_from_main and _forking_pid == _served:
        _die_with_parent(_forking_pid)


def _workers_die_with_their_daemon() -> None:
    """From now on, every process this daemon forks from its main thread (its workers) dies with
    it; not what they fork in turn (job code), nor what any other runner forks."""
    global _served
    _served = os.getpid()
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


def _inherit(request: Request) -> None:
    """Take what a fresh process takes from the client's parent across exec: ignored signals stay
    ignored (SIGINT too: PySpark starts the JVM with it ignored, so a ^C for the driver leaves
    its Python processes be) and the rest are the default, SIGINT raising KeyboardInterrupt
    unless ignored; SIGPIPE and SIGXFSZ are ignored by any interpreter, the client's as well.
    Then the signal mask, the umask and the resource limits."""
    for signum in range(1, signal.NSIG):
        if signum in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(signum, signal.SIG_IGN if signum in request.ignored else signal.SIG_DFL)
        except (OSError, ValueError):     # the C library's own (32, 33)
            pass
    if signal.SIGINT not in request.ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, request.blocked)
    os.umask(request.umask)
    for number, limit in request.limits.items():
        resource.setrlimit(number, limit)


def _streams_of_the_client() -> None:
    """``sys.stdin``, ``sys.stdout`` and ``sys.stderr`` made anew over the client's descriptors, as
    the interpreter makes them as it starts (create_stdio): the zygote's learnt what they could
    of its own descriptors when made (its /dev/null seekable, a driver's terminal line-buffered).
    The encoding, error handler and buffering are the zygote's: the request's settings fit them."""
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        old = getattr(sys, name)
        if old is None:
            continue
        unbuffered = old.write_through          # PYTHONUNBUFFERED, -u: standard input stays buffered
        binary = io.open(fd, "rb" if fd == 0 else "wb", 0 if unbuffered and fd != 0 else -1, closefd=False)
        raw = getattr(binary, "raw", binary)
        raw.name = f"<{name}>"
        line_buffered = not unbuffered and (raw.isatty() or fd == 2)
        text = io.TextIOWrapper(binary, old.encoding, old.errors, "\n", line_buffered, unbuffered)
        text.mode = "r" if fd == 0 else "w"
        setattr(sys, name, text)
        setattr(sys, f"__{name}__", text)


def run(request: Request, fds: list[int], zygote: int, closing: list, interpreter: list[str]) -> None:
    """In the forked child: become the process the client would have started. Never returns."""
    try:
        for fd in closing:
            os.close(fd)
        _die_with_parent(zygote)
        if request.module == _DAEMON:
            _workers_die_with_their_daemon()
        signal.set_wakeup_fd(-1)
        _inherit(request)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        _streams_of_the_client()
        os.chdir(request.cwd)
        os.environ.clear()
        os.environ.update(request.env)
        time.tzset()        # time read TZ as the zygote imported it; a fresh process reads the request's
        sys.path[:] = zygote_fit.fresh_path(request.cwd, request.env, interpreter)
        sys.argv = [request.module, *request.args]
        sys.orig_argv = [sys.executable, "-m", request.module, *request.args]    # as the client would exec
        sys.modules.pop(request.module, None)     # imported by the zygote; runs afresh as __main__
    except BaseException:
        traceback.print_exc()
        _end(1)
    _end(_run_as_main(request.module))


def _run_as_main(module: str) -> int:
    """Run ``module`` as ``python -m`` does and end as the interpreter ends (Py_RunMain): the
    exit status, or minus the signal to die by."""
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = _system_exit_status(exc.code)
    except BaseException as exc:
        sys.excepthook(type(exc), exc, exc.__traceback__)
        code = -signal.SIGINT if isinstance(exc, KeyboardInterrupt) else 1
    try:
        threading._shutdown()        # what the interpreter's finalization waits for first
    except BaseException as exc:     # noqa: BLE001 (as the interpreter, report and go on)
        sys.excepthook(type(exc), exc, exc.__traceback__)
    atexit._run_exitfuncs()
    return code


def _system_exit_status(code) -> int:
    """SystemExit's code as the interpreter takes it: None is 0, an int itself, anything else is
    printed to stderr and is 1."""
    if code is None or isinstance(code, int):
        return (code or 0) & 0xFF       # exit(-1) is 255: never a signal to die by
    try:
        print(code, file=sys.stderr)
    except Exception:     # noqa: BLE001 (no stderr to print to)
        pass
    return 1


def _end(code: int) -> None:
    """Flush the streams (a failure is status 120, as the interpreter's), then exit with ``code``,
    or die by the signal ``-code``."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:     # noqa: BLE001
            code = code or 120
    if code < 0:
        if code != -signal.SIGKILL:     # whose disposition cannot be set
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)
