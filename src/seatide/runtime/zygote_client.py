# The Python Spark runs when a driver has a zygote (runtime/python_zygote.py).
#
# Not imported: python_zygote.write_client copies this text into an executable file after a
# header that sets REAL_PYTHON and SOCKET, and points PYSPARK_PYTHON at it. It runs with -S
# (no site-packages: it needs the standard library only, and starts in a few milliseconds).
#
# ``-m <a module the zygote forks>`` (a streaming source's runner, a daemon): hand our
# standard streams, arguments, environment and directory to the zygote, and exit as the
# forked process does. Anything else, or no zygote to talk to: become the real interpreter
# with the same arguments.
#
# Spark starts one per streaming query and per daemon: it imports only built-in modules and
# _socket. With json, socket and signal (and the re and enum they import) it took 22 ms of CPU
# a start, now 9, what the interpreter itself takes.

import _signal
import _socket
import posix
import sys

FORKED_MODULES = ("pyspark.sql.streaming.python_streaming_source_runner", "pyspark.daemon")


def _become_python():
    posix.execv(REAL_PYTHON, [REAL_PYTHON] + sys.argv[1:])  # noqa: F821  (set by the header)


def _exit_as(code):
    if code < 0:                  # killed by a signal: be killed by it too
        if code != -_signal.SIGKILL:      # whose disposition cannot be set (signal() raised)
            _signal.signal(-code, _signal.SIG_DFL)
        posix.kill(posix.getpid(), -code)
    posix._exit(code & 0xFF)


def _recv_exactly(conn, size):
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _inherited():
    """What a process takes across exec from its parent (the JVM), which the zygote's child must
    take from us: the umask, the signals ignored and blocked, the resource limits."""
    import resource     # an extension module, 0.3 ms

    umask = posix.umask(0)
    posix.umask(umask)
    ignored = [n for n in range(1, _signal.NSIG) if _signal.getsignal(n) == _signal.SIG_IGN]
    blocked = sorted(_signal.pthread_sigmask(_signal.SIG_BLOCK, []))
    limits = []
    for name in dir(resource):
        if name.startswith("RLIMIT_"):
            number = getattr(resource, name)
            soft, hard = resource.getrlimit(number)
            limits.append("%d:%d:%d" % (number, soft, hard))
    return [str(umask), ",".join(map(str, ignored)), ",".join(map(str, blocked)), ",".join(limits)]


def _request(args):
    """NUL-separated (no argument, path or variable can hold a NUL): the module, the directory,
    what we inherited, how many arguments, the arguments, then the environment as NAME=VALUE
    (zygote_request.py)."""
    fields = [args[1].encode("utf-8", "surrogateescape"), posix.getcwdb()]
    fields += [field.encode() for field in _inherited()] + [str(len(args) - 2).encode()]
    fields += [arg.encode("utf-8", "surrogateescape") for arg in args[2:]]
    fields += [name + b"=" + value for name, value in posix.environ.items()]
    return b"\0".join(fields)


def main():
    args = sys.argv[1:]
    if len(args) < 2 or args[0] != "-m" or args[1] not in FORKED_MODULES:
        _become_python()
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.connect(SOCKET)  # noqa: F821  (set by the header)
    except OSError:
        _become_python()
    try:
        request = _request(args)
    except OSError:               # no directory to name (it was deleted): the interpreter copes as it does
        _become_python()
    streams = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))     # C ints, as SCM_RIGHTS takes
    try:
        conn.sendmsg([len(request).to_bytes(4, "big")], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, streams)])
        conn.sendall(request)
        started = _recv_exactly(conn, 4)
    except OSError:
        started = None
    if started is None:           # nothing was forked: start the runner ourselves
        _become_python()
    status = _recv_exactly(conn, 4)
    # No status: the zygote died, and the runner with it (PR_SET_PDEATHSIG).
    _exit_as(1 if status is None else int.from_bytes(status, "big", signed=True))


main()
