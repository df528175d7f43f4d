"""The driver processes on this machine, read from /proc: which are drivers (of a job, of a
store, of this test run), whether one has exited, when it started, and a watch that samples them.

Apart from ``cluster.py`` (processes a test starts and the store they share) because this reads
the machine's process table, whoever started the processes: chaos runs, the simulation's
fleet and single tests use it without a ``Cluster``.
"""

from __future__ import annotations

import os
import threading
import time

from seatide.store.address import normalize_url


def proc_stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat from the third (the state) on; None once the process is
    gone. The second, the name in parentheses, may hold spaces: split after its ')'."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def exited(pid: int) -> bool:
    """Gone, or exited and not yet reaped by its parent (state Z)."""
    fields = proc_stat(pid)
    return fields is None or fields[0] == "Z"


def started_since_boot(pid: int) -> float:
    """When the process started, in seconds since boot, to a clock tick (field 22). psutil's
    create_time() adds the boot time, which the kernel gives in whole seconds: up to 1 s
    early, enough to date a process started just after a moment before it."""
    return int(proc_stat(pid)[22 - 3]) / os.sysconf("SC_CLK_TCK")


def _parent(pid: int) -> int | None:
    fields = proc_stat(pid)
    try:
        return int(fields[1]) if fields else None
    except ValueError:
        return None


# Test runs side by side (pytest-xdist workers, a chaos run next to the tests) reuse job ids.
# Every process a run starts inherits this variable, drivers re-parented to init included, so
# a run counts only its own drivers. Each process that looks sets its own mark first.
OWNER_VAR = "SEATIDE_TEST_OWNER"


def mark_owner() -> str:
    """Marks this process (and all it starts from now on) as the owner of its drivers."""
    os.environ[OWNER_VAR] = f"{os.getpid()}-{os.urandom(4).hex()}"
    return os.environ[OWNER_VAR]


def _owned(pid: str, mark: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return mark in handle.read().split(b"\0")
    except OSError:
        return False


DRIVER_MODULE = b"seatide.runtime.driver"


def _cmdline(pid: str) -> bytes | None:
    """/proc/PID/cmdline, read without a buffered file object: DriverWatch reads every
    process's 20 times a second, and the object's set-up cost more than the reads."""
    try:
        fd = os.open(f"/proc/{pid}/cmdline", os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


class SettledProcesses:
    """Processes a watch has read and found not to be drivers, not read again while they live.

    A watch looks 20 times a second; reading every process's command line each time cost 1.9 ms
    of CPU a look over 170 processes (4 % of a core per watch, tens of CPU-s over a CI run). A
    process turns into a driver only by exec, and SeaTide's launchers (``subprocess``) exec
    within moments of their fork: so a process is read on every look until it has been read as
    no driver ``GRACE_S`` after it was first seen, then skipped until its pid leaves /proc (a pid
    used again later is a new process, read anew). A gap between looks longer than ``GAP_S`` (the
    watch starved of CPU, stopped) forgets everything: a process may have exec'd, or its pid
    been reused, unseen. Drivers themselves are read on every look (their job id may change: a
    warm driver names its attempt's job once it has one)."""

    GRACE_S = 5.0
    GAP_S = 1.0

    def __init__(self) -> None:
        self._first_seen: dict[str, float] = {}
        self._settled: set[str] = set()
        self._last_look = float("-inf")

    def look(self, entries: list[str], now: float) -> None:
        """Forget the processes gone since the last look, or all of them after a gap."""
        if now - self._last_look > self.GAP_S:
            self._first_seen.clear()
            self._settled.clear()
        self._last_look = now
        present = set(entries)
        for pid in [pid for pid in self._first_seen if pid not in present]:
            del self._first_seen[pid]
            self._settled.discard(pid)

    def settled(self, pid: str) -> bool:
        return pid in self._settled

    def read(self, pid: str, now: float, driver: bool) -> None:
        """What a look read: a driver is read on every look from then on, even once it ends
        as something else (a driver's fork execs its JVM); a process read as no driver
        ``GRACE_S`` after it was first seen is settled."""
        if driver:
            self._first_seen[pid] = float("inf")
            return
        first = self._first_seen.setdefault(pid, now)
        if now - first >= self.GRACE_S:
            self._settled.add(pid)


def driver_pids(job_id: str | None = None, store_url: str | tuple[str, ...] | None = None,
                settled: SettledProcesses | None = None) -> list[int]:
    """Driver processes on this machine (optionally of one job, of one store given by one URL
    or several), from /proc; only this run's own when it has marked itself (``mark_owner``).
    ``settled``: a watch's record of processes it need not read again.

    A driver's own short-lived fork (it forks to start its JVM) carries the driver's
    command line until it execs; it is the same driver, so children of drivers are not counted.
    """
    owner = os.environ.get(OWNER_VAR)
    mark = f"{OWNER_VAR}={owner}".encode() if owner else None
    urls = None if store_url is None else {normalize_url(u) for u in ((store_url,) if isinstance(store_url, str)
                                                                        else store_url)}
    entries = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    now = time.monotonic()
    if settled is not None:
        settled.look(entries, now)
    pids = []
    for entry in entries:
        if settled is not None and settled.settled(entry):
            continue
        raw = _cmdline(entry)
        # Most processes are not drivers (a JVM's command line alone is kilobytes): a byte
        # search skips them before any split or decode.
        if raw is not None and settled is not None:
            settled.read(entry, now, driver=DRIVER_MODULE in raw)
        if raw is None or DRIVER_MODULE not in raw:
            continue
        args = [arg.decode(errors="replace") for arg in raw.split(b"\0")]
        if "seatide.runtime.driver" not in args or (job_id is not None and job_id not in args):
            continue
        if mark is not None and not _owned(entry, mark):
            continue
        if urls is None or urls.intersection(normalize_url(arg) for arg in args):
            pids.append(int(entry))
    return [pid for pid in pids if _parent(pid) not in pids]


def drivers_by_job(store_url: str | tuple[str, ...] | None = None) -> dict[str, list[int]]:
    """Every driver process of these stores (as ``driver_pids``), by the job its command line
    names (a warm driver names its attempt's job once it has one; an idle one names none)."""
    by_job: dict[str, list[int]] = {}
    for pid in driver_pids(store_url=store_url):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                args = [a.decode(errors="replace") for a in handle.read().split(b"\0")]
        except OSError:
            continue
        job = args[args.index("--job-id") + 1] if "--job-id" in args[:-1] else ""
        if job and not job.startswith("~"):          # an idle warm driver's placeholder (runtime/warm_driver.py)
            by_job.setdefault(job, []).append(pid)
    return by_job


def attempt_of(pid: int) -> int | None:
    """The attempt a driver process runs, from its command line (``--attempt N``); None when
    it names none (an idle warm driver) or is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            args = [a.decode(errors="replace") for a in handle.read().split(b"\0")]
        return int(args[args.index("--attempt") + 1])
    except (OSError, ValueError, IndexError):
        return None


class DriverWatch:
    """Samples the process table in the background: the most drivers one job ever had at once."""

    def __init__(self, job_id: str, interval: float = 0.05):
        self.job_id = job_id
        self.interval = interval
        self.max_seen = 0
        self.pids_seen: set[int] = set()
        self._settled = SettledProcesses()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "DriverWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            pids = driver_pids(self.job_id, settled=self._settled)
            self.pids_seen.update(pids)
            self.max_seen = max(self.max_seen, len(pids))
            self._stop.wait(self.interval)
