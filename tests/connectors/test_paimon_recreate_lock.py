"""Outside review of the late RECREATE_SCHEMA (a decision recorded, its driver killed before carrying it
out, carried out later by another attempt): its rename of the table's directory onto a tombstone and
the writers of a filesystem warehouse shared no lock.

* R-B: a publish that holds the table object across the rename commits into a directory pypaimon
  makes again at the table's path, its data files in the tombstone: the batch ends in no table;
* a publish (a roll-forward) during a pending rename failed for good, saying the table was dropped;
* R-G: two carriers of one decision: the second took the first's rename for a dead carrier's,
  put the table back under it and carried the decision out again; the first then renamed the
  emptied tombstone onto the table's path; a zombie carrier (its fence refuses) did the same, since
  it looked for a rename to put back before its fence;
* R-A: a carrier killed right after its rename left the table renamed away, and a fresh start
  (a scope of its own) was refused (TableSetAside) on every attempt;
* review 2, M1: every writer's hold listed the whole database directory for a renamed-away table,
  quadratic in the database's tables (5000 tables: 118 s of holds per batch).

A real pypaimon filesystem warehouse in a temp dir; carriers and writers are threads held at
failpoints the test controls, and a carrier killed is a real process SIGKILLed at ``paimon.renamed``.
A wait is a poll of a condition with a deadline, never a sleep."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pytest

from seatide import failpoints
from seatide.connectors.paimon import table_setup
from seatide.connectors.paimon.recreate import hold_for_writing
from seatide.connectors.paimon.target import PaimonSpec, PaimonTarget
from seatide.connectors.paimon.warehouse import get_table, open_catalog
from tests.connectors.paimon_helpers import put, rows_of

DEADLINE = 30.0
USER = "T_job_1_0_0_L_"       # job job_1, pipeline 0, sink 0, lineage L (commits.of_job)


def _table(tmp_path) -> tuple[str, dict]:
    """db.t holding 1, 2, and the identity a RECREATE_SCHEMA decided for it. (warehouse, decided)"""
    warehouse = str(tmp_path / "warehouse")
    put(warehouse, "db.t", {"id": pa.array([1, 2], pa.int64()), "name": pa.array(["before", "before"])})
    return warehouse, table_setup.identity(get_table(open_catalog(warehouse), "db", "t"))


def _target(warehouse: str) -> PaimonTarget:
    spec = PaimonSpec(warehouse, "db", "t", "CREATE_SCHEMA_WHEN_NOT_EXIST", "APPEND_DATA", [], [], {})
    return PaimonTarget("target", [], spec, lambda: None)


def _rows(*ids: int):
    return pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array([f"batch {i}" for i in ids])})


def recreate(warehouse: str, decided: dict, *looks: bool) -> None:
    """A carrier of job 1's decision, made when the table held ``_table``'s one snapshot: the door's
    "still owed" answers ``looks`` in turn (the last one repeated)."""
    answers = list(looks)
    carrier = _target(warehouse)
    carrier.destroy_owed = lambda carried_out: answers.pop(0) if len(answers) > 1 else answers[0]
    carrier.destroy({"recreate": decided, "held": 1, "own": "T_job_1_"}, lambda: None)


def _ids(warehouse: str):
    """The table's ids as a reader sees them; None when no table is there to read."""
    try:
        return sorted(row[0] for row in rows_of(warehouse, "db.t", ("id",)))
    except Exception:       # noqa: BLE001 - no table (or a directory that is none)
        return None


def _paths(warehouse: str, decided: dict) -> tuple[str, str]:
    """(the table's directory, its decided tombstone)"""
    database = os.path.join(warehouse, "db.db")
    return os.path.join(database, "t"), os.path.join(database, f".t.recreated-{decided['created']}")


class Points:
    """``failpoints.hit`` for the test's threads: a point reached by a named thread sets an event,
    and a held one waits until the test lets it go."""

    def __init__(self, monkeypatch):
        self.reached: dict[tuple[str, str], threading.Event] = {}
        self.go: dict[tuple[str, str], threading.Event] = {}
        real = failpoints.hit

        def hit(name, *args, **kwargs):
            at = (threading.current_thread().name, name)
            if at in self.reached:
                self.reached[at].set()
                if at in self.go and not self.go[at].wait(DEADLINE):
                    raise AssertionError(f"{at} held past the deadline")
            return real(name, *args, **kwargs)

        monkeypatch.setattr(failpoints, "hit", hit)

    def seen(self, thread: str, point: str) -> threading.Event:
        """Set once ``thread`` reaches ``point``: asked before the thread starts."""
        return self.reached.setdefault((thread, point), threading.Event())

    def hold(self, thread: str, point: str) -> tuple[threading.Event, threading.Event]:
        return self.seen(thread, point), self.go.setdefault((thread, point), threading.Event())


class Run(threading.Thread):
    def __init__(self, name: str, work):
        super().__init__(name=name, daemon=True)
        self.work, self.raised, self.done = work, None, threading.Event()

    def run(self):
        try:
            self.work()
        except BaseException as exc:  # noqa: BLE001 - kept for the test's assertion
            self.raised = exc
        finally:
            self.done.set()

    def finish(self):
        self.join(DEADLINE)
        assert not self.is_alive(), f"{self.name} still running past the deadline"


def _first(*events: threading.Event) -> None:
    """Until one of ``events`` is set (a poll with a deadline)."""
    deadline = time.monotonic() + DEADLINE
    while not any(e.is_set() for e in events):
        assert time.monotonic() < deadline, "no event before the deadline"
        events[0].wait(0.02)


def writer_held_at(points: Points, thread: str, point: str, warehouse: str) -> tuple[Run, threading.Event]:
    """A writer of batch 1 (10, as ``USER``) in ``thread``, started and held at ``point``: (it, its go)."""
    reached, go = points.hold(thread, point)
    writer = _target(warehouse)
    run = Run(thread, lambda: writer.publish(writer.stage_arrow(_rows(10), USER, 1)))
    run.start()
    _first(reached, run.done)
    return run, go


def test_a_publish_holding_the_table_across_a_late_recreate_keeps_its_batch(tmp_path, monkeypatch):
    """R-B: the publisher has the table object and is about to commit; the late RECREATE renames the
    table away, asks again (the batch is decided: kept, refused) and puts it back."""
    warehouse, decided = _table(tmp_path)
    points = Points(monkeypatch)
    publisher, commit = writer_held_at(points, "publisher", "paimon.before_commit", warehouse)
    renamed, go = points.hold("carrier", "paimon.renamed")
    waits = points.seen("carrier", "paimon.lock_wait")
    carrier = Run("carrier", lambda: recreate(warehouse, decided, True, False))
    carrier.start()
    _first(renamed, waits, carrier.done)
    commit.set()
    publisher.finish()
    go.set()
    carrier.finish()
    assert publisher.raised is None, publisher.raised
    assert _ids(warehouse) == [1, 2, 10], f"the committed batch is in no table (carrier: {carrier.raised!r})"
    assert carrier.raised is None, carrier.raised


def test_a_publish_during_a_pending_rename_waits_and_commits(tmp_path, monkeypatch):
    """Low: batch 1 staged and decided, its driver killed (its open files closed); the next attempt
    rolls it forward while a late RECREATE has the table renamed away, asking again."""
    warehouse, decided = _table(tmp_path)
    part = _target(warehouse).stage_arrow(_rows(10), USER, 1)
    gc.collect()                # the stager is gone: its files closed, as a killed driver's are
    points = Points(monkeypatch)
    renamed, go = points.hold("carrier", "paimon.renamed")
    carrier = Run("carrier", lambda: recreate(warehouse, decided, True, False))
    carrier.start()
    _first(renamed, carrier.done)
    waits = points.seen("publisher", "paimon.lock_wait")
    publisher = Run("publisher", lambda: _target(warehouse).publish(part))
    publisher.start()
    _first(waits, publisher.done)
    go.set()
    carrier.finish()
    publisher.finish()
    assert publisher.raised is None, f"{type(publisher.raised).__name__}: {publisher.raised}"
    assert carrier.raised is None, carrier.raised
    assert _ids(warehouse) == [1, 2, 10]


def _beside_a_carrier_held_after_its_rename(tmp_path, monkeypatch, second_carrier) -> tuple[Run, Run]:
    """A first carrier of the decision held right after its rename, ``second_carrier(warehouse, decided)``
    run beside it until it ends or waits for the table's lock, then the first let go; both ended."""
    warehouse, decided = _table(tmp_path)
    points = Points(monkeypatch)
    renamed, go = points.hold("first", "paimon.renamed")
    first = Run("first", lambda: recreate(warehouse, decided, True))
    first.start()
    _first(renamed, first.done)
    waits = points.seen("second", "paimon.lock_wait")
    second = Run("second", lambda: second_carrier(warehouse, decided))
    second.start()
    _first(waits, second.done)
    go.set()
    first.finish()
    second.finish()
    path, tombstone = _paths(warehouse, decided)
    assert not os.path.exists(tombstone) and _ids(warehouse) is None, \
        f"the decided table was not dropped once: {os.listdir(os.path.dirname(tombstone))} ({first.raised!r})"
    assert not [e for e in os.listdir(os.path.dirname(path)) if e.startswith(".t.dropped-")], "a dropped table kept"
    assert not os.path.exists(path), f"left at the table's path: {os.listdir(path)}"
    return first, second


def test_two_carriers_of_one_decision_carry_it_out_once(tmp_path, monkeypatch):
    """R-G: two pipelines side by side carry one decision out; the first is held right after its rename."""
    first, second = _beside_a_carrier_held_after_its_rename(
        tmp_path, monkeypatch, lambda warehouse, decided: recreate(warehouse, decided, True))
    assert first.raised is None and second.raised is None, (first.raised, second.raised)


# ``recreate(warehouse, decided, True)`` in a process of its own, which imports the Paimon target only (not
# this module, pytest and the store: 0.7 s more per killed carrier)
_KILLED_CARRIER = """
import json, sys
from seatide.connectors.paimon.target import PaimonSpec, PaimonTarget
spec = PaimonSpec(sys.argv[1], "db", "t", "CREATE_SCHEMA_WHEN_NOT_EXIST", "APPEND_DATA", [], [], {})
carrier = PaimonTarget("target", [], spec, lambda: None)
carrier.destroy_owed = lambda carried_out: True
carrier.destroy({"recreate": json.loads(sys.argv[2]), "held": 1, "own": "T_job_1_"}, lambda: None)
"""


def test_a_fresh_start_writes_after_a_carrier_killed_right_after_its_rename(tmp_path):
    """R-A: the carrier's driver is SIGKILLed right after its rename; a fresh start (a scope of its own,
    APPEND_DATA) writes next, then the decision's scope carries the decision out again (refused now)."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    warehouse, decided = _table(tmp_path)
    path, tombstone = _paths(warehouse, decided)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    killed = subprocess.run([sys.executable, "-c", _KILLED_CARRIER, warehouse, json.dumps(decided)], cwd=root,
                            env={**os.environ, failpoints.POINTS_ENV: "paimon.renamed=kill"}, timeout=DEADLINE,
                            capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert os.path.isdir(tombstone) and not os.path.exists(path)
    fresh = _target(warehouse)
    fresh.ensure(StructType([StructField("id", LongType()), StructField("name", StringType())]))
    fresh.publish(fresh.stage_arrow(_rows(10), USER, 1))
    assert _ids(warehouse) == [1, 2, 10]
    recreate(warehouse, decided, False)     # the fresh start's rows are kept: refused, nothing destroyed
    assert _ids(warehouse) == [1, 2, 10]


class Fenced(RuntimeError):
    """A zombie's fence: its attempt was replaced."""


def test_a_zombie_carrier_never_touches_the_table_another_carrier_renamed_away(tmp_path, monkeypatch):
    """R-G, the fence: a carrier whose attempt was replaced looked for a table renamed away before its
    fence, and put the first carrier's table back; the first then took the decision as carried out."""
    def zombie(warehouse, decided):
        carrier = _target(warehouse)
        carrier.destroy_owed = lambda carried_out: True
        carrier.destroy({"recreate": decided}, lambda: (_ for _ in ()).throw(Fenced("attempt replaced")))

    first, second = _beside_a_carrier_held_after_its_rename(tmp_path, monkeypatch, zombie)
    assert first.raised is None and isinstance(second.raised, Fenced), (first.raised, second.raised)


def test_a_late_recreate_refuses_over_a_commit_made_outside_seatide(tmp_path):
    """H1: job 1 decided RECREATE_SCHEMA when the table held snapshot 1; a writer outside SeaTide (pypaimon,
    its own commit user) commits 3 since. The late carry-out refuses, naming the table and the way on."""
    from seatide.connectors.paimon.warehouse import PaimonError

    warehouse, decided = _table(tmp_path)
    put(warehouse, "db.t", {"id": pa.array([3], pa.int64()), "name": pa.array(["outside"])})
    with pytest.raises(PaimonError, match="refused: snapshot 2 was committed since by .* not this job") as refused:
        recreate(warehouse, decided, True)
    assert "db.t" in str(refused.value) and "as a new job" in str(refused.value), refused.value
    assert _ids(warehouse) == [1, 2, 3], "a late RECREATE_SCHEMA dropped a commit made outside SeaTide"


def _entries_read_by_one_batch(tmp_path, tables: int, monkeypatch) -> int:
    """The directory entries the holds of one batch writing ``tables`` tables of one database read."""
    db = tmp_path / f"w{tables}" / "db.db"
    paths = [str(db / f"t{i}") for i in range(tables)]
    for p in paths:
        os.makedirs(os.path.join(p, "schema"))
        hold_for_writing(p, "db.t", "a writer").release()     # the first batch made its lock files
    read = []
    real = os.listdir

    def counted(path="."):
        found = real(path)
        read.append(len(found))
        return found

    monkeypatch.setattr(os, "listdir", counted)
    for p in paths:
        hold_for_writing(p, "db.t", "a writer").release()
    monkeypatch.setattr(os, "listdir", real)
    return sum(read)


def test_a_batch_over_many_tables_reads_entries_linear_in_tables(tmp_path, monkeypatch):
    small, large = (_entries_read_by_one_batch(tmp_path, n, monkeypatch) for n in (50, 500))
    assert large <= 10 * small * 2, (f"one batch's holds read {small} directory entries over 50 tables, {large} over "
                                     "500: quadratic in the tables of the database")


def test_a_recreate_removes_the_record_of_a_batch_committed_before_its_decision(tmp_path, monkeypatch):
    """Job 2's driver killed right after Paimon's commit left its batch's record, marked deciding
    (``pending_batches``); job 1 decided RECREATE_SCHEMA after that commit: the record is stale, removed, and the drop goes on."""
    warehouse, decided = _table(tmp_path)
    real = failpoints.hit

    def killed_after_commit(name, *args, **kwargs):
        if name == "paimon.after_commit":
            raise SystemExit(name)
        return real(name, *args, **kwargs)

    writer = _target(warehouse)
    part = writer.stage_arrow(_rows(10), "T_job_2_0_0_L_", 1)
    writer.deciding(part)           # marked: removed as committed, not as never decided (outside review, F5)
    monkeypatch.setattr(failpoints, "hit", killed_after_commit)
    with pytest.raises(SystemExit):
        writer.publish(part)
    monkeypatch.setattr(failpoints, "hit", real)
    pending = os.path.join(warehouse, "db.db", ".t.seatide-pending")
    assert [name.split(".")[0] for name in os.listdir(pending)] == ["T_job_2_0_0_L_1"]     # one staging's record
    carrier = _target(warehouse)
    carrier.destroy_owed = lambda carried_out: True
    carrier.destroy({"recreate": decided, "held": 2, "own": "T_job_1_"}, lambda: None)     # decided after it
    assert _ids(warehouse) is None, "the decided table was not dropped"
    assert os.listdir(pending) == [], "the committed batch's record stayed"
