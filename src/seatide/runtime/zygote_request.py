"""What a zygote client (zygote_client.py) asks the Python zygote (python_zygote.py) for, as bytes.

A request describes the fresh process the client would otherwise become: its module and
arguments, directory and environment, and the state a process inherits from its parent across
``exec`` that the zygote's own may differ from (the client is the JVM's child; the zygote the
driver's): the umask, the signals it ignores and blocks, its resource limits (the JVM raises its
soft limit on open files to the hard one, so its children have 20,000 where the driver has 1,024).

The client sends the length of the request with its three standard streams (SCM_RIGHTS), then
the request: NUL-separated fields (no argument, path or variable can hold a NUL), the module,
the directory, the umask, the ignored signals, the blocked signals, the resource limits, how many
arguments, the arguments, then the environment as NAME=VALUE. Signals are comma-separated
numbers, limits comma-separated ``resource:soft:hard`` with -1 for unlimited.
"""

from __future__ import annotations

import os
import socket
import struct
from typing import NamedTuple

HEADER = struct.Struct("!I")
STATUS = struct.Struct("!i")
_FIXED = 7          # the fields before the arguments


class Request(NamedTuple):
    module: str
    cwd: str
    args: list[str]
    env: dict[str, str]
    umask: int
    ignored: frozenset[int]            # signals whose disposition is SIG_IGN
    blocked: frozenset[int]            # the signal mask
    limits: dict[int, tuple[int, int]]   # resource -> (soft, hard)


def _numbers(field: str) -> list[int]:
    return [int(n) for n in field.split(",")] if field else []


def decode_request(data: bytes) -> Request:
    """A request from its bytes; ValueError if malformed."""
    fields = [os.fsdecode(field) for field in data.split(b"\0")]
    if len(fields) < _FIXED:
        raise ValueError("a malformed request")
    count = int(fields[_FIXED - 1])
    if not 0 <= count <= len(fields) - _FIXED:
        raise ValueError("a malformed request")
    env = dict(entry.split("=", 1) for entry in fields[_FIXED + count:])
    limits = {}
    for triple in fields[5].split(",") if fields[5] else []:
        resource, soft, hard = (int(n) for n in triple.split(":"))
        limits[resource] = (soft, hard)
    return Request(module=fields[0], cwd=fields[1], args=fields[_FIXED:_FIXED + count], env=env,
                   umask=int(fields[2]), ignored=frozenset(_numbers(fields[3])),
                   blocked=frozenset(_numbers(fields[4])), limits=limits)


def _recv_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the client went away")
        data += chunk
    return data


def read_request(conn: socket.socket) -> tuple[Request, list[int]]:
    """The request and the client's three standard streams. Raises ConnectionError, ValueError or
    OSError for a client gone or a malformed request, having closed the streams it received:
    left open, they were inherited by every later child, and the JVM reading a dead process's
    output through them never saw its end."""
    header, fds, _flags, _addr = socket.recv_fds(conn, HEADER.size, 3)
    try:
        if len(header) < HEADER.size or len(fds) != 3:
            raise ConnectionError("a malformed request")
        return decode_request(_recv_exactly(conn, HEADER.unpack(header)[0])), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
