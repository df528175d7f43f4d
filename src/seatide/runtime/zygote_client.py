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

import json
import os
import signal
import socket
import struct
import sys

FORKED_MODULES = ("pyspark.sql.streaming.python_streaming_source_runner", "pyspark.daemon")


def _become_python():
    os.execv(REAL_PYTHON, [REAL_PYTHON] + sys.argv[1:])  # noqa: F821  (set by the header)


def _exit_as(code):
    if code < 0:                  # killed by a signal: be killed by it too
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


def _recv_exactly(conn, size):
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def main():
    args = sys.argv[1:]
    if len(args) < 2 or args[0] != "-m" or args[1] not in FORKED_MODULES:
        _become_python()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(SOCKET)  # noqa: F821  (set by the header)
    except OSError:
        _become_python()
    request = json.dumps({"module": args[1], "args": args[2:], "env": dict(os.environ),
                          "cwd": os.getcwd()}).encode()
    try:
        socket.send_fds(conn, [struct.pack("!I", len(request))], [0, 1, 2])
        conn.sendall(request)
        started = _recv_exactly(conn, 4)
    except OSError:
        started = None
    if started is None:           # nothing was forked: start the runner ourselves
        _become_python()
    status = _recv_exactly(conn, 4)
    # No status: the zygote died, and the runner with it (PR_SET_PDEATHSIG).
    _exit_as(1 if status is None else struct.unpack("!i", status)[0])


main()
