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
  host, what, since) and removes it when let go; a waiter names those, and removes one whose
  process on this host is gone (its kernel lock went with it; its record stayed).

A filesystem that refuses flock (NFS mounted ``nolock`` or ``local_lock``, where it is local to one
host, or without a lock manager; FUSE object stores) cannot exclude writers of other hosts: it is
refused for good (``PaimonError``), naming the warehouse and what to do.
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import json
import logging
import os
import socket
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
        self.path, self.what, self.record = lock_file(table_path), what, None
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
        os.makedirs(self.holders, exist_ok=True)
        self.record = os.path.join(self.holders, f"{socket.gethostname()}-{os.getpid()}-{next(_holds)}")
        with open(self.record, "w") as f:
            json.dump({"pid": os.getpid(), "host": socket.gethostname(), "what": self.what, "mode": mode,
                       "since": time.time()}, f)

    def held_by(self) -> str:
        """The holders on record, for a waiter's message."""
        try:
            names = sorted(os.listdir(self.holders))
        except OSError:
            names = []
        found = []
        for name in names:
            try:
                with open(os.path.join(self.holders, name)) as f:
                    held = json.load(f)
            except (OSError, ValueError):
                continue        # let go meanwhile
            gone = held.get("host") == socket.gethostname() and not _alive(held.get("pid"))
            if gone:            # its kernel lock went with its process: only the record stayed
                _unlink(os.path.join(self.holders, name))
                continue
            found.append(f"{held.get('what')} ({held.get('mode')}, process {held.get('pid')} on {held.get('host')}, "
                         f"for {time.time() - held.get('since', time.time()):.0f}s)")
        return "; ".join(found) or "no holder on record (a SeaTide before records, or one passing the turnstile)"

    def release(self) -> None:
        """Let the lock go (closing its file does); twice is once."""
        handle, self.handle = self.handle, None
        record, self.record = self.record, None
        if record is not None:
            _unlink(record)
        if handle is not None:
            handle.close()

    def __enter__(self) -> "TableLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _open(path: str, what: str):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return open(path, "a+")
    except OSError as exc:
        raise _refused(path, what, exc) from None


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
        "must work across every host that writes the warehouse: put the warehouse on a local disk, or on NFS "
        "mounted with a lock manager (not 'nolock' nor 'local_lock'); FUSE object stores are not supported")


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass            # removed already


def _alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (OSError, TypeError, ValueError):
        return True
    return True


__all__ = ["TableLock", "TableLockWait", "WAIT_S", "lock_file"]
