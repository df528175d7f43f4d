"""The lock a Paimon table's writers and its RECREATE_SCHEMA share, in the warehouse beside the table.

A filesystem warehouse has no lock its writers share, and a RECREATE_SCHEMA carried out late
renames the table's directory away: a writer that stages or commits meanwhile writes into a
directory pypaimon makes again at the table's path (outside review, R-B). So every SeaTide writer
of the table holds this lock shared from the moment it stages a batch until that batch is
committed or given up (and while it creates or alters the table, or carries out DROP_DATA's
commit), and a RECREATE_SCHEMA holds it alone for its check and rename of the table: the rename
never happens under a writer, and no writer writes while the table is away.

It is ``flock(2)`` on a file ``.<table>.seatide-lock`` beside the table. The kernel lets it go
when its holder's file closes, and so when its process dies however it dies: a killed holder
never leaves a lock behind that someone would have to judge stale. flock locks open file
descriptions, not processes: two holders in one process (pipelines as threads of one driver)
exclude each other too, as two processes do. Three rules around it (outside review of a64466d):

* **a turnstile** (``.<table>.seatide-turnstile``): Linux lets new shared holders in while a
  request to hold alone waits, so writers whose batches overlap kept a RECREATE_SCHEMA out for
  ever. Every taker passes the turnstile (held alone, briefly) before the lock; one who wants the
  lock alone keeps the turnstile while it waits, so writers that come after it wait behind it.
* **bounded waits**: a blocking flock cannot be cancelled, and a hold kept by mistake (a batch
  never published whose driver lives) would hold its waiter for ever. A taker polls (LOCK_NB)
  until ``WAIT_S``, asking ``cancelled`` (its attempt's fence) between polls, logs who it waits
  for, then fails with the holders it saw (``TableLockWait``: retried, as the Jdbc sink's lock waits).
* **holders on record**: each hold writes a record into ``.<table>.seatide-holders/`` (process,
  host, what, since), flocks it while it holds, and removes it when let go; a waiter names those
  whose flock is held, and removes one whose flock is free: its holder died (its kernel locks
  went with it; its record stayed).

Supported: a filesystem that honours flock per open file (a local disk), served by one host's
kernel, every writer of the warehouse on that host. Not NFS: Linux emulates flock there with POSIX
locks, per process (two holders in one driver would not exclude each other; closing one lock file
drops the process's other holds). A filesystem that refuses flock (NFS mounted ``nolock``, FUSE
object stores) is refused for good (``PaimonError``), naming the warehouse and what to do.
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import json
import logging
import os
import socket
import stat
import time
from typing import Callable

from seatide import failpoints
from seatide.connectors.paimon.warehouse import PaimonError

log = logging.getLogger(__name__)

# How long a taker waits for the lock before it fails (retried): far above one batch's stage to
# publish, as the Jdbc sink's lock waits (``jdbc/sink_session.lock_wait_s``).
WAIT_S = 90.0
_POLL_S = (0.01, 0.5)        # the first and the longest pause between two tries
_REFUSED = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL, errno.EACCES, errno.EPERM, errno.EROFS}
_DENIED = {errno.EACCES, errno.EPERM}
_holds = itertools.count()


class TableLockWait(RuntimeError):
    """The table's lock was not had within ``WAIT_S``: its holders are named; the attempt retries."""


def lock_file(table_path: str) -> str:
    """The lock file of the table at ``table_path`` (a local directory): a dot file pypaimon lists as no table."""
    return _beside(table_path, "seatide-lock")


def _beside(table_path: str, what: str) -> str:
    return os.path.join(os.path.dirname(table_path), f".{os.path.basename(table_path)}.{what}")


class TableLock:
    """One hold of a table's lock, shared (a writer) or alone (``exclusive``: RECREATE_SCHEMA, a put-back);
    taken when made (``paimon.lock_wait`` is hit before waiting), for at most ``WAIT_S``."""

    def __init__(self, table_path: str, exclusive: bool, what: str, cancelled: Callable[[], None] = lambda: None):
        self.path, self.what, self.record, self.record_handle = lock_file(table_path), what, None, None
        self.holders = _beside(table_path, "seatide-holders")
        self.handle = None
        deadline = time.monotonic() + WAIT_S
        turnstile = _open(_beside(table_path, "seatide-turnstile"), what)
        try:
            _take(turnstile, fcntl.LOCK_EX, deadline, cancelled, self)
            self.handle = _open(self.path, what)
            _take(self.handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, deadline, cancelled, self)
            self._record("alone" if exclusive else "shared")
        except BaseException:
            self.release()
            raise
        finally:
            turnstile.close()       # passed: writers behind it go on to the lock (they wait there if held alone)

    def _record(self, mode: str) -> None:
        """This hold on record, the record flocked by this hold for as long as it holds: a record
        whose flock is free is a dead holder's (outside review 2, L1). Written under a
        name of its own and renamed once flocked, so no waiter sees it unflocked."""
        try:
            shared_dir(self.holders)
            record = os.path.join(self.holders, f"{socket.gethostname()}-{os.getpid()}-{next(_holds)}")
            handle = open(record + ".new", "w")
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            json.dump({"pid": os.getpid(), "host": socket.gethostname(), "what": self.what, "mode": mode,
                       "since": time.time()}, handle)
            handle.flush()
            os.rename(record + ".new", record)
        except OSError as exc:
            raise refused_dir(self.holders, self.what, exc) from None
        self.record, self.record_handle = record, handle

    def held_by(self) -> str:
        """The holders on record whose record's flock proves them alive, for a waiter's message; the
        records of dead holders removed."""
        try:
            names = sorted(n for n in os.listdir(self.holders) if not n.endswith(".new"))
        except OSError:
            names = []
        found = []
        for name in names:
            held = _live_record(os.path.join(self.holders, name))
            if held is not None:
                found.append(f"{held.get('what')} ({held.get('mode')}, process {held.get('pid')} on "
                             f"{held.get('host')}, for {time.time() - held.get('since', time.time()):.0f}s)")
        return "; ".join(found) or "no holder on record (a SeaTide before records, or one passing the turnstile)"

    def release(self) -> None:
        """Let the lock go (closing its file does); twice is once."""
        handle, self.handle = self.handle, None
        record, self.record = self.record, None
        record_handle, self.record_handle = self.record_handle, None
        if record is not None:
            remove(record)
        if record_handle is not None:
            record_handle.close()
        if handle is not None:
            handle.close()

    def __enter__(self) -> "TableLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _open(path: str, what: str):
    """The lock file ``path``, made when missing, opened read-write: where flock is emulated by POSIX
    locks, holding it alone needs a write descriptor. flock itself needs only a read one: one made by
    another OS user (0644 under its umask) is opened read-only (outside review 2, M2)."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            return open(path, "r+")
        except FileNotFoundError:
            return open(path, "a+")
        except PermissionError:
            return open(path, "r")
    except OSError as exc:
        raise refused_dir(path, what, exc) if exc.errno in _DENIED else _refused(path, what, exc) from None


def _take(handle, mode: int, deadline: float, cancelled: Callable[[], None], hold: TableLock) -> None:
    """``mode`` on ``handle``, polling until ``deadline``; ``cancelled()`` raises to stop waiting."""
    pause, said = _POLL_S[0], False
    while True:
        try:
            fcntl.flock(handle.fileno(), mode | fcntl.LOCK_NB)
            return
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            if exc.errno not in _REFUSED:
                raise
            if exc.errno in _DENIED and not os.access(handle.name, os.R_OK):
                raise refused_dir(handle.name, hold.what, exc) from None
            raise _refused(handle.name, hold.what, exc) from None
        if not said:
            said = True
            log.info("Paimon: %s waits for the table's lock %s, held by %s", hold.what, hold.path, hold.held_by())
            failpoints.hit("paimon.lock_wait")
        cancelled()
        if time.monotonic() >= deadline:
            raise TableLockWait(
                f"Paimon: {hold.what} waited {WAIT_S:g}s for the table's lock {hold.path} and gave up; held by "
                f"{hold.held_by()}. The attempt is retried; if a holder named here is stuck, end its job") from None
        time.sleep(min(pause, max(deadline - time.monotonic(), 0)))
        pause = min(pause * 2, _POLL_S[1])


def _refused(path: str, what: str, exc: OSError) -> PaimonError:
    warehouse = os.path.dirname(os.path.dirname(path))
    return PaimonError(
        f"Paimon sink: {what}: the filesystem of warehouse {warehouse} refused the table's lock file {path} "
        f"({exc.strerror or exc}). SeaTide's writers of one Paimon table exclude each other with flock(2), which "
        "must be honoured per open file: put the warehouse on a local disk of the host that runs its writers; "
        "NFS and FUSE object stores are not supported")


def remove(path: str) -> None:
    """Remove the file ``path``; removed already is removed."""
    try:
        os.unlink(path)
    except OSError:
        pass


def sync_dir(path: str) -> None:
    """The directory ``path``'s entries made durable (a record written, renamed in, before what relies on it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def shared_dir(path: str) -> None:
    """The directory ``path`` made, as writable as the directory it is in: every OS user that may write
    the table may record in it (two service accounts sharing a warehouse: outside review 2, M2)."""
    if os.path.isdir(path):
        return
    os.makedirs(path, exist_ok=True)
    try:
        os.chmod(path, stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) & 0o777)
    except OSError:
        pass            # another user's, made meanwhile: its own mode stands


def refused_dir(path: str, what: str, exc: OSError) -> PaimonError:
    """``path`` (a lock file, SeaTide's records beside a table) refused by the filesystem: permission
    said as permission, the rest as a filesystem SeaTide cannot use."""
    if exc.errno in _DENIED:
        return PaimonError(
            f"Paimon sink: {what}: permission denied on {path} ({exc.strerror}): SeaTide's lock and records "
            "of a table live beside it, and every OS user that writes the warehouse must be able to read the "
            "lock files and write the records there. Give those users one group with write access to the "
            "database directory (chmod g+ws), or run the jobs as one user")
    return PaimonError(f"Paimon sink: {what}: cannot write {path} in the warehouse ({exc.strerror or exc}); "
                       "free space, or make the warehouse writable, then submit the job again")


def held_alone_by(table_path: str) -> str | None:
    """What holds the table's lock alone now, as its live record says (a RECREATE_SCHEMA's carrier); None:
    nobody on record. A look that changes nothing (a dead holder's record is left for a waiter to remove)."""
    holders = _beside(table_path, "seatide-holders")
    try:
        names = sorted(n for n in os.listdir(holders) if not n.endswith(".new"))
    except OSError:
        return None
    for name in names:
        held = _live_record(os.path.join(holders, name), tidy=False)
        if held is not None and held.get("mode") == "alone":
            return f"{held.get('what')} (process {held.get('pid')} on {held.get('host')})"
    return None


def _live_record(path: str, tidy: bool = True) -> dict | None:
    """The holder record ``path``, or None when its holder is gone (its flock free: the record is
    removed, when ``tidy``) or it was let go meanwhile."""
    try:
        with open(path) as f:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return json.load(f)         # flocked: its holder lives
            except OSError:
                return json.load(f)         # no flock to ask here: named, as before
    except (OSError, ValueError):
        return None                         # let go meanwhile
    if tidy:
        remove(path)                       # its flock went with its holder's process: only the record stayed
    return None


__all__ = ["TableLock", "TableLockWait", "WAIT_S", "held_alone_by", "lock_file", "refused_dir", "remove", "shared_dir", "sync_dir"]
