"""A network partition on this machine: a network namespace joined to the host by a veth pair.

Processes started inside the namespace (``Partition.wrap(argv)``) reach the host only
through the pair's two addresses, a /30 of 10.213.0.0/16 chosen for this run. ``cut()``
takes the host end down: their packets to the store vanish (no reset, no refusal: a true
partition, seen only by timeouts), while they still share this machine's file system, so a
cut-off driver can still write its sink directory. ``heal()`` brings the link back.

Only a store reached over TCP can be partitioned: the chaos runner offers the fault with
``--store private-postgres`` alone. A SQLite store is a file; a process that can write the
sink directory can write the database beside it, so a partition means nothing there.

Needs root and iproute2 (``ip``); ``unavailable()`` says why not, in one line, so a caller
can leave the fault out instead of failing. Everything created here is removed by
``close()``, by the context manager, and at interpreter exit (``atexit``) if a run died
before it could.
"""

from __future__ import annotations

import atexit
import ipaddress
import os
import random
import shutil
import subprocess

# The /16 every partition takes its /30 from; a /30 holds exactly the pair's two addresses.
NETWORK = ipaddress.ip_network("10.213.0.0/16")
_made = 0     # partitions made by this process: part of their names


class PartitionUnavailable(RuntimeError):
    """This machine cannot make a partition (not root, no ``ip``, namespaces refused)."""


def unavailable() -> str | None:
    """Why no partition can be made here, or None when one can."""
    if shutil.which("ip") is None:
        return "no 'ip' command (iproute2) on PATH"
    if os.geteuid() != 0:
        return "network namespaces need root"
    return None


def _ip(*args: str) -> str:
    run = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if run.returncode != 0:
        raise PartitionUnavailable(f"'ip {' '.join(args)}' failed: {run.stderr.strip() or run.returncode}")
    return run.stdout


def _addresses_in_use() -> set[ipaddress.IPv4Network]:
    """The /30s of NETWORK some interface on the host already has (another run's partition)."""
    used = set()
    for line in _ip("-o", "-4", "addr", "show").splitlines():
        for word in line.split():
            if "/" in word and word[0].isdigit():
                interface = ipaddress.ip_interface(word)
                if interface.ip in NETWORK:
                    used.add(ipaddress.ip_network(f"{interface.ip}/30", strict=False))
    return used


class Partition:
    """One namespace and one veth pair; names and addresses unique to this process and seed."""

    def __init__(self, seed: int = 0, tag: str | None = None):
        reason = unavailable()
        if reason is not None:
            raise PartitionUnavailable(reason)
        global _made
        _made += 1
        tag = tag or f"{os.getpid() % 1_000_000}{_made % 10}"
        # Interface names are at most 15 characters: "stp" + 7 digits + one letter.
        self.netns = f"stp{tag}n"
        self.host_if = f"stp{tag}h"
        self.inner_if = f"stp{tag}i"
        self.subnet = self._free_subnet(seed)
        host, inner = list(self.subnet.hosts())
        self.host_address, self.inner_address = str(host), str(inner)
        self.is_cut = False
        self._created = False

    def _free_subnet(self, seed: int) -> ipaddress.IPv4Network:
        subnets = NETWORK.num_addresses // 4
        rng = random.Random(f"{seed}/{os.getpid()}")
        used = _addresses_in_use()
        for _ in range(64):
            subnet = ipaddress.ip_network(f"{NETWORK[4 * rng.randrange(1, subnets)]}/30")
            if subnet not in used:
                return subnet
        raise PartitionUnavailable(f"no free /30 in {NETWORK} after 64 tries")

    def create(self) -> "Partition":
        atexit.register(self.close)
        self._created = True
        try:
            _ip("netns", "add", self.netns)
            _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.inner_if)
            _ip("link", "set", self.inner_if, "netns", self.netns)
            _ip("addr", "add", f"{self.host_address}/30", "dev", self.host_if)
            _ip("link", "set", self.host_if, "up")
            inside = ("netns", "exec", self.netns, "ip")
            _ip(*inside, "addr", "add", f"{self.inner_address}/30", "dev", self.inner_if)
            _ip(*inside, "link", "set", self.inner_if, "up")
            _ip(*inside, "link", "set", "lo", "up")     # Spark's driver and its JVM talk over loopback
        except Exception:
            self.close()
            raise
        return self

    def wrap(self, argv: list[str]) -> list[str]:
        """The command run inside the namespace (``ip netns exec`` execs it: same pid)."""
        return ["ip", "netns", "exec", self.netns, *argv]

    # Spark binds the address the host name resolves to; where that is a LAN address it does
    # not exist in the namespace. Here (host name -> 127.0.0.1) Spark starts without it too,
    # measured: a local session inside the namespace in 17.5 s without, 15.1 s with.
    env = {"SPARK_LOCAL_IP": "127.0.0.1"}

    def cut(self) -> None:
        _ip("link", "set", self.host_if, "down")
        self.is_cut = True

    def heal(self) -> None:
        _ip("link", "set", self.host_if, "up")
        # A connect tried during the cut left each end's neighbour entry unresolved, its next ARP
        # request up to a second away: the first packet after the heal waited for it (measured:
        # 5 of 8 connects right after a heal took 1.0 s, the SYN's own retry time). Forgotten
        # entries are asked for at once.
        _ip("neigh", "flush", "dev", self.host_if)
        _ip("-n", self.netns, "neigh", "flush", "dev", self.inner_if)
        self.is_cut = False

    def close(self) -> None:
        """Remove the namespace and the pair; safe to call twice, or after a half-done create."""
        if not self._created:
            return
        self._created = False
        for args in (("link", "del", self.host_if), ("netns", "del", self.netns)):
            subprocess.run(["ip", *args], capture_output=True, timeout=30)   # already gone is fine
        atexit.unregister(self.close)

    def __enter__(self) -> "Partition":
        return self.create()

    def __exit__(self, *exc) -> None:
        self.close()
