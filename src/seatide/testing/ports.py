"""Ports for the servers tests start: free now, below the kernel's ephemeral range, and claimed
against this machine's other test processes for the life of the process that drew them."""

from __future__ import annotations

import fcntl
import os
import random
import socket


def free_port() -> int:
    """A port no one listens on now, for a server the test starts next. Drawn from below the
    kernel's ephemeral range: a port ``bind(0)`` hands out is free only until the next outgoing
    connection takes it, and the server binds seconds later (a coordinator lost its port so at
    load 25: "address already in use"); outgoing connections never take one from below.
    Each port handed out is claimed against this machine's other test processes for this
    process's life (``_claim``): three pytest processes drew ports from the same range, and a
    coordinator lost one so when another process drew it between this check and its server's
    bind (stop 62's run)."""
    low = _ephemeral_low()
    for _ in range(500):
        port = random.randrange(max(1024, low - 12000), low)
        if not _claim(port):
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                os.close(_claims.pop(port))     # someone else's server: let go of it
                continue
            return port
    raise RuntimeError(f"no free port below the ephemeral range ({low}) in 500 tries")


PORT_CLAIMS_DIR = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"seatide-port-claims-{os.getuid()}")
# port -> the open file whose lock claims it: kept for this process's life, since a test's
# server may stop and start again on its port (a store restart) long after it was handed out.
_claims: dict[int, int] = {}


def _claim(port: int) -> bool:
    """True if this process may hand ``port`` out: it now holds the port's claim, an exclusive
    ``flock`` on a file of its own name that no other live process holds. The kernel drops the
    lock when this process ends (never before: no age limit, no race over an old claim), and
    children do not inherit it (the file is opened close-on-exec)."""
    if port in _claims:
        return False             # handed out by this process before: its server may still run
    os.makedirs(PORT_CLAIMS_DIR, exist_ok=True)
    fd = os.open(os.path.join(PORT_CLAIMS_DIR, str(port)), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _claims[port] = fd
    return True


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as handle:
            return int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768
