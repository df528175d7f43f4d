"""The driver processes on this machine, read from /proc: which are drivers (of a job, of a
store, of this test run), whether one has exited, when it started, and a watch that samples them.

Apart from ``cluster.py`` (processes a test starts and the store they share) because this reads
the machine's process table, whoever started the processes: chaos runs, the simulation's
fleet and single tests use it without a ``Cluster``.
"""

from __future__ import annotations

import os
import threading

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


def driver_pids(job_id: str | None = None, store_url: str | tuple[str, ...] | None = None) -> list[int]:
    """Driver processes on this machine (optionally of one job, of one store given by one URL
    or several), from /proc; only this run's own when it has marked itself (``mark_owner``).

    A driver's own short-lived fork (it forks to start its JVM) carries the driver's
    command line until it execs; it is the same driver, so children of drivers are not counted.
    """
    owner = os.environ.get(OWNER_VAR)
    mark = f"{OWNER_VAR}={owner}".encode() if owner else None
    urls = None if store_url is None else {normalize_url(u) for u in ((store_url,) if isinstance(store_url, str)
                                                                        else store_url)}
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        raw = _cmdline(entry)
        # Most processes are not drivers (a JVM's command line alone is kilobytes): a byte
        # search skips them before any split or decode.
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
            pids = driver_pids(self.job_id)
            self.pids_seen.update(pids)
            self.max_seen = max(self.max_seen, len(pids))
            self._stop.wait(self.interval)
