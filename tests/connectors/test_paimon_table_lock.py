"""The Paimon table lock, from an outside review of it (a64466d..4b5cfb2; these tests failed before its fixes).

* starvation: a RECREATE_SCHEMA waiting for the lock alone is overtaken by every new shared hold
  (Linux flock has no writer preference), so writers whose batches overlap keep it out forever;
* a leaked hold: a batch staged and never published (its pipeline failed between stage and
  publish, the driver keeps its runs until every pipeline ends) keeps the lock until that
  pipeline's next batch, which never comes: another pipeline's carrier waits forever;
* a filesystem where flock is refused (ENOLCK: NFS without a lock manager; EOPNOTSUPP: FUSE):
  every batch fails with a raw OSError, retried as transient, no word of what to do.

A real pypaimon warehouse in a temp dir; writers and carriers are threads held at failpoints."""

from __future__ import annotations

import errno
import fcntl

import pytest

from seatide import failpoints
from seatide.connectors.paimon import table_lock
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
