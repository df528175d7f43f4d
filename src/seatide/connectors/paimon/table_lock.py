"""The lock a Paimon table's writers and its RECREATE_SCHEMA share, in the warehouse beside the table.

A filesystem warehouse has no lock its writers share, and a RECREATE_SCHEMA carried out late
renames the table's directory away: a writer that stages or commits meanwhile writes into a
directory pypaimon makes again at the table's path (outside review, R-B). So every SeaTide writer
of the table holds this lock shared from the moment it stages a batch until that batch is
committed (and while it creates or alters the table, or carries out DROP_DATA's commit), and a
RECREATE_SCHEMA holds it alone from its check of the table to its end (the table put back, or
dropped): the rename never happens under a writer, and no writer writes while the table is away.

It is ``flock(2)`` on a file ``.<table>.seatide-lock`` beside the table. The kernel lets it go
when its holder's file closes, and so when its process dies however it dies: a killed holder
never leaves a lock behind that someone would have to judge stale (an O_EXCL lock file would,
with an owner record and a lease to judge it by). flock locks open file descriptions, not
processes: two holders in one process (pipelines as threads of one driver) exclude each other
too, as two processes do. The one who holds it alone writes an owner record into the file
(process, host, what it does), which a waiter logs. Other ways considered: carrying the late
RECREATE out only when no other pipeline has the table open needs a registry of who has it open
that a killed driver would leave stale, and still leaves the moment between a look and the rename.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import time

from seatide import failpoints

log = logging.getLogger(__name__)


def lock_file(table_path: str) -> str:
    """The lock file of the table at ``table_path`` (a local directory): a dot file pypaimon lists as no table."""
    return os.path.join(os.path.dirname(table_path), f".{os.path.basename(table_path)}.seatide-lock")


class TableLock:
    """One hold of a table's lock, shared (a writer) or alone (``exclusive``: RECREATE_SCHEMA); taken
    when made, waiting for as long as the holders hold it (``paimon.lock_wait`` is hit before waiting)."""

    def __init__(self, table_path: str, exclusive: bool, what: str):
        path = lock_file(table_path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.handle = open(path, "a+")
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        try:
            try:
                fcntl.flock(self.handle.fileno(), mode | fcntl.LOCK_NB)
            except BlockingIOError:
                log.info("Paimon: %s waits for the table's lock %s (last held alone by %s)", what, path,
                         self._owner() or "nobody recorded")
                failpoints.hit("paimon.lock_wait")
                fcntl.flock(self.handle.fileno(), mode)
            if exclusive:
                self.handle.seek(0)
                self.handle.truncate()
                self.handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "what": what,
                                              "since": time.time()}))
                self.handle.flush()
        except BaseException:
            self.release()
            raise

    def _owner(self) -> str:
        self.handle.seek(0)
        return self.handle.read(1000).strip()

    def release(self) -> None:
        """Let the lock go (closing its file does); twice is once."""
        handle, self.handle = self.handle, None
        if handle is not None:
            handle.close()

    def __enter__(self) -> "TableLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


__all__ = ["TableLock", "lock_file"]
