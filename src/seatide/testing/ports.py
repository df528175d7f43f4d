"""Ports for the servers tests start: free now, below the kernel's ephemeral range, and claimed
against this machine's other test processes until the server has surely bound its port."""

from __future__ import annotations

import os
import random
import socket
import time


def free_port() -> int:
    """A port no one listens on now, for a server the test starts next. Drawn from below the
    kernel's ephemeral range: a port ``bind(0)`` hands out is free only until the next outgoing
    connection takes it, and the server binds seconds later (a coordinator lost its port so at
    load 25: "address already in use"); outgoing connections never take one from below.
    Each port handed out is claimed for this machine's other test processes too (a file per
    port): three pytest processes drew ports from the same range, and a coordinator lost one
    so when another process drew it between this check and its server's bind (stop 62's run)."""
    low = _ephemeral_low()
    for _ in range(500):
        port = random.randrange(max(1024, low - 12000), low)
        if not _claim(port):
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port below the ephemeral range ({low}) in 500 tries")


# A claim keeps other test processes off a port for this long: far more than a server takes to
# bind it, far less than a suite run, so a long run can use a port again (12,000 to draw from).
PORT_CLAIM_S = 600.0
PORT_CLAIMS_DIR = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"seatide-port-claims-{os.getuid()}")


def _claim(port: int) -> bool:
    """True if this process may hand ``port`` out: no other process claimed it in the last
    ``PORT_CLAIM_S`` seconds. The claim is a file created with O_EXCL, so of two processes
    drawing the same port at once exactly one wins."""
    os.makedirs(PORT_CLAIMS_DIR, exist_ok=True)
    path = os.path.join(PORT_CLAIMS_DIR, str(port))
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return True
    except FileExistsError:
        pass
    try:
        stale = time.time() - os.stat(path).st_mtime > PORT_CLAIM_S
    except FileNotFoundError:
        return False
    if not stale:
        return False
    # An old claim: take it over by renaming our own fresh file onto it. Two processes racing
    # here may both win, but only for a port no one has touched for ten minutes.
    mine = f"{path}.{os.getpid()}"
    os.close(os.open(mine, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600))
    os.replace(mine, path)
    return True


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as handle:
            return int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768
