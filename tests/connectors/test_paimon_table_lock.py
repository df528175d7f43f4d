"""The Paimon table lock, from an outside review of it (a64466d..4b5cfb2; these tests failed before its fixes).

* starvation: a RECREATE_SCHEMA waiting for the lock alone is overtaken by every new shared hold
  (Linux flock has no writer preference), so writers whose batches overlap keep it out forever;
* a leaked hold: a batch staged and never published (its pipeline failed between stage and
  publish, the driver keeps its runs until every pipeline ends) keeps the lock until that
  pipeline's next batch, which never comes: another pipeline's carrier waits forever;
* a filesystem where flock is refused (ENOLCK: NFS without a lock manager; EOPNOTSUPP: FUSE):
  every batch fails with a raw OSError, retried as transient, no word of what to do.

Outside review 2 of 5ad2a7f (these failed before its fixes):

* two OS users sharing a warehouse: the second could not open the first's 0644 lock file ``a+`` and
  was told its filesystem refuses flock (move to a local disk): wrong cause, wrong way on (M2);
* a holder of another host SIGKILLed: its record stayed and every later waiter named it as a holder
  for ever, "end its job" of a process that does not exist (L1). Its other host is a real process in
  a UTS namespace of its own (``unshare --uts``, hostname ``other-host``).

A real pypaimon warehouse in a temp dir; writers and carriers are threads held at failpoints."""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

from seatide import failpoints
from seatide.connectors.paimon import table_lock
from seatide.connectors.paimon.table_lock import TableLock, TableLockWait
from seatide.connectors.paimon.warehouse import PaimonError
from tests.connectors.test_paimon_recreate_lock import (USER, Points, Run, _first, _ids, _rows, _table, _target,
                                                        recreate, writer_held_at)


def test_a_waiting_recreate_is_not_overtaken_by_new_writers(tmp_path, monkeypatch):
    """Writer A holds the lock (a batch staged); the carrier waits; writer B comes next and should
    wait behind the carrier. It takes the lock at once: with A and B overlapping, the carrier never gets in."""
    warehouse, decided = _table(tmp_path)
    points = Points(monkeypatch)
    writer_a, a_go = writer_held_at(points, "A", "paimon.staged", warehouse)
    carrier_waits = points.seen("carrier", "paimon.lock_wait")
    carrier = Run("carrier", lambda: recreate(warehouse, decided, True, False))
    carrier.start()
    _first(carrier_waits, carrier.done)
    b_waits = points.seen("B", "paimon.lock_wait")
    b_staged, b_go = points.hold("B", "paimon.staged")
    b = _target(warehouse)
    writer_b = Run("B", lambda: b.publish(b.stage_arrow(_rows(20), "T_job_2_0_L_", 1)))
    writer_b.start()
    _first(b_staged, b_waits, writer_b.done)
    overtaken = b_staged.is_set() and not b_waits.is_set()
    a_go.set()
    writer_a.finish()
    carrier_after_a = carrier.done.is_set()       # A's hold ended: B's keeps the carrier out
    b_go.set()
    writer_b.finish()
    carrier.finish()
    assert not overtaken, (f"writer B took the table's lock while a RECREATE_SCHEMA waited for it (the carrier "
                           f"ended after A let go: {carrier_after_a}); writers whose holds overlap keep it out forever")


def test_a_batch_staged_and_never_published_does_not_keep_the_lock_from_a_carrier(tmp_path, monkeypatch):
    """Pipeline A staged a batch, then failed before publishing it (its next target's rows, a transient
    Spark failure): the driver keeps A's run until every pipeline ends (driver._supervise), and only
    A's next batch (PaimonTargets.begin) lets the lock go. Pipeline B's carrier in the same driver
    waits for it; the supervisor's cancel cannot reach a thread blocked in flock: the attempt never ends."""
    warehouse, decided = _table(tmp_path)
    monkeypatch.setattr(table_lock, "WAIT_S", 1.0)      # (fixed: the wait is bounded; 90s by default)
    points = Points(monkeypatch)
    failed = _target(warehouse)
    failed.stage_arrow(_rows(10), USER, 1)       # staged; the batch then fails before its decision
    carrier_waits = points.seen("carrier", "paimon.lock_wait")
    carrier = Run("carrier", lambda: recreate(warehouse, decided, True))
    carrier.start()
    _first(carrier_waits, carrier.done)
    carrier.join(5.0)
    still_waiting = carrier.is_alive()
    failed.let_go()                              # let the test end; the driver never does this
    carrier.finish()
    assert not still_waiting, ("a carrier waits for the lock a failed pipeline's staged batch keeps while the "
                               "driver lives; nothing ends the wait nor says what it waits for")
    assert isinstance(carrier.raised, table_lock.TableLockWait), carrier.raised
    assert "a writer of db.t (shared, process" in str(carrier.raised), carrier.raised   # who holds it, named
    assert _ids(warehouse) == [1, 2]


def test_a_filesystem_refusing_flock_fails_with_what_to_do(tmp_path, monkeypatch):
    """The kernel refuses flock (ENOLCK on NFS without a lock manager, as the kernel answers there;
    simulated at fcntl.flock): a writer's batch fails. It should be a PaimonError naming the lock file
    and the way out, not a raw OSError the runtime retries as transient on every attempt."""
    warehouse, _ = _table(tmp_path)

    def refused(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", refused)
    with pytest.raises(Exception) as raised:
        _target(warehouse).stage_arrow(_rows(10), USER, 1)
    assert isinstance(raised.value, PaimonError), f"{type(raised.value).__name__}: {raised.value}"
    assert table_lock.lock_file("x") and "lock" in str(raised.value)
    assert _ids(warehouse) == [1, 2]


@pytest.mark.spark
@pytest.mark.parametrize("point", ["sink.before_decision", "paimon.before_commit"])
def test_a_batch_failing_between_stage_and_publish_lets_the_lock_go(spark, tmp_path, monkeypatch, point):
    """The driver's side of the leaked hold: a real sink run whose batch fails after staging (before its
    decision; at its publish) lets the table's lock go as it fails, while the driver keeps the run."""
    from tests.connectors.paimon_helpers import make_sink, run
    from tests.connectors.test_paimon_sink import inserts

    warehouse = tmp_path / "wh"
    sink = run(spark, make_sink(warehouse), tmp_path / "log")
    sink.write(inserts(spark, [1]), 0)
    monkeypatch.setitem(failpoints._POINTS, point, "raise")
    with pytest.raises(failpoints.FailpointError):
        sink.write(inserts(spark, [2]), 1)
    monkeypatch.setattr(table_lock, "WAIT_S", 0.2)
    with table_lock.TableLock(str(warehouse / "db.db" / "t"), True, "a RECREATE_SCHEMA of db.t"):
        pass                        # had at once: TableLockWait otherwise


SECOND_USER = """
import sys
from seatide.connectors.paimon.table_lock import TableLock
try:
    TableLock(sys.argv[1], False, "a writer of db.t").release()
    print("TOOK")
except Exception as exc:
    print(type(exc).__name__ + ": " + str(exc))
"""


def _as_nobody(table: str) -> str:
    """What a writer of ``table`` run as the OS user nobody (a real second process) says."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
                          SECOND_USER, table], capture_output=True, text=True, env=env, timeout=60)
    return out.stdout.strip() or out.stderr.strip()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a second user's process")
def test_a_second_os_user_takes_the_lock_files_the_first_made_or_is_told_permission():
    with tempfile.TemporaryDirectory() as root:         # not under pytest's 0700 directory: nobody reaches it
        database = os.path.join(root, "warehouse", "db.db")
        table = os.path.join(database, "t")
        os.makedirs(table)
        for d in (root, os.path.dirname(database), database, table):
            os.chmod(d, 0o777)                          # a warehouse both users write
        old = os.umask(0o022)
        try:
            TableLock(table, False, "the first user's writer").release()
        finally:
            os.umask(old)
        assert _as_nobody(table) == "TOOK"              # 0644 lock files: a read descriptor flocks
        os.chmod(table_lock.lock_file(table), 0o600)    # now one the second user cannot read
        said = _as_nobody(table)
        assert "permission denied on" in said and "local disk" not in said, said


KILLED_HOLDER = """
import sys
from seatide.connectors.paimon.table_lock import TableLock
hold = TableLock(sys.argv[1], False, "a writer of db.t on other-host")
print("held", flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare")
def test_a_killed_holder_of_another_host_is_not_named_for_ever(tmp_path, monkeypatch):
    table = tmp_path / "warehouse" / "db.db" / "t"
    table.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(["unshare", "--uts", "sh", "-c", 'hostname other-host && exec "$0" -c "$1" "$2"',
                              sys.executable, KILLED_HOLDER, str(table)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout.readline().strip() == "held"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    live = TableLock(str(table), False, "a writer of db.t (live, stuck)")      # a real holder, this process
    monkeypatch.setattr(table_lock, "WAIT_S", 0.3)
    try:
        with pytest.raises(TableLockWait) as waited:
            TableLock(str(table), True, "RECREATE_SCHEMA of db.t")
    finally:
        live.release()
    assert "other-host" not in str(waited.value), waited.value
    assert "a writer of db.t (live, stuck)" in str(waited.value), waited.value     # a live holder still named
    assert os.listdir(table.parent / ".t.seatide-holders") == [], "the dead holder's record stayed"


def test_a_lock_file_its_taker_may_write_is_opened_read_write(tmp_path):
    """Where flock is emulated by POSIX locks (Linux NFS), holding a file alone needs a write descriptor:
    a lock file opened read-only could never be held alone there (outside review of 0dfb7e2, F3)."""
    table = str(tmp_path / "db.db" / "t")
    with TableLock(table, True, "a test") as hold:
        assert hold.handle.writable(), hold.handle.mode
    with TableLock(table, True, "a test") as hold:      # the file exists now
        assert hold.handle.writable(), hold.handle.mode
