"""Outside review, finding 7: a Paimon check ahead (``PaimonTarget.check_save_modes`` through
``SaveModeDoor.check_ahead``) skipped the row check when a RECREATE_SCHEMA's driver died right after
renaming the table away (``recreate``: the table lies in its tombstone until the next writer puts it
back). It said nothing although the table's rows were in the moved-aside copy; the refusal came only
when the sink prepared the table (``save_mode_plan`` puts it back, then refuses), after another sink of
the job had destroyed its target.

A real pypaimon filesystem warehouse; the carrier is a real process SIGKILLed at ``paimon.renamed``
(``test_paimon_recreate_lock``). No Spark: the check ahead is the target's own code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from seatide import failpoints
from seatide.connectors.paimon.target import PaimonSpec, PaimonTarget
from seatide.connectors.paimon.warehouse import PaimonError
from seatide.plugin.save_mode_door import SaveModeDoor
from seatide.runtime.commit_log import FileDecisions, SinkCommitLog
from tests.connectors.test_paimon_recreate_lock import _KILLED_CARRIER, DEADLINE, _paths, _table

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def killed_carrier(tmp_path_factory) -> tuple[str, dict]:
    """db.t holding 1, 2, renamed away by a RECREATE_SCHEMA whose process was SIGKILLed right after
    its rename; made once for the module. (warehouse, the decided identity)"""
    warehouse, decided = _table(tmp_path_factory.mktemp("killed"))
    killed = subprocess.run([sys.executable, "-c", _KILLED_CARRIER, warehouse, json.dumps(decided)], cwd=ROOT,
                            env={**os.environ, failpoints.POINTS_ENV: "paimon.renamed=kill"}, timeout=DEADLINE,
                            capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr[-2000:]
    return warehouse, decided


@pytest.fixture
def moved_aside(killed_carrier, tmp_path) -> tuple[str, str, str]:
    """A copy of ``killed_carrier``'s warehouse of the test's own. (warehouse, the table's directory, its tombstone)"""
    warehouse = shutil.copytree(killed_carrier[0], str(tmp_path / "warehouse"))
    path, tombstone = _paths(warehouse, killed_carrier[1])
    assert os.path.isdir(tombstone) and not os.path.exists(path)
    return warehouse, path, tombstone


def _target(warehouse: str, schema_mode: str, data_mode: str) -> PaimonTarget:
    spec = PaimonSpec(warehouse, "db", "t", schema_mode, data_mode, [], [], {})
    return PaimonTarget("target", [], spec, lambda: None, "job_2")


def _check_ahead(target: PaimonTarget, tmp_path) -> None:
    """The door's check ahead, no decision of the target's save modes standing (another job's)."""
    SaveModeDoor(FileDecisions(SinkCommitLog(str(tmp_path / "log"))), "L").check_ahead(target, None)


def _tree(root: str) -> dict:
    """Every entry under ``root`` with its size and modification time: what a look must leave as it is."""
    found = {}
    for parent, dirs, files in os.walk(root):
        for name in dirs + files:
            at = os.path.join(parent, name)
            found[os.path.relpath(at, root)] = (os.path.getsize(at), os.stat(at).st_mtime_ns)
    return found


def test_rows_of_a_table_moved_aside_by_a_dead_recreate_refuse_ahead(moved_aside, tmp_path):
    """ERROR_WHEN_DATA_EXISTS: the rows lie in the moved-aside copy, which the next writer puts back. The
    check ahead refuses them, as preparing the table does, and leaves the warehouse as it found it."""
    warehouse, path, tombstone = moved_aside
    before = _tree(warehouse)
    with pytest.raises(PaimonError, match="holds rows") as refused:
        _check_ahead(_target(warehouse, "CREATE_SCHEMA_WHEN_NOT_EXIST", "ERROR_WHEN_DATA_EXISTS"), tmp_path)
    assert tombstone in str(refused.value), refused.value
    assert _tree(warehouse) == before, "a check ahead changed the warehouse"
    with pytest.raises(PaimonError, match="holds rows"):      # preparing it: put back, then refused
        _target(warehouse, "CREATE_SCHEMA_WHEN_NOT_EXIST", "ERROR_WHEN_DATA_EXISTS").save_mode_plan(None)
    assert os.path.isdir(path) and not os.path.exists(tombstone)


def test_a_table_moved_aside_by_a_dead_recreate_is_no_missing_table_ahead(moved_aside, tmp_path):
    """ERROR_WHEN_SCHEMA_NOT_EXIST, APPEND_DATA: the table exists (moved aside, put back by the next
    writer): the check ahead passes and changes nothing."""
    warehouse, _, _ = moved_aside
    before = _tree(warehouse)
    _check_ahead(_target(warehouse, "ERROR_WHEN_SCHEMA_NOT_EXIST", "APPEND_DATA"), tmp_path)
    assert _tree(warehouse) == before, "a check ahead changed the warehouse"


def _refusal_ahead(warehouse: str, tmp_path) -> str:
    with pytest.raises(PaimonError, match="holds rows") as refused:
        _check_ahead(_target(warehouse, "CREATE_SCHEMA_WHEN_NOT_EXIST", "ERROR_WHEN_DATA_EXISTS"), tmp_path)
    return str(refused.value)


def test_the_refusal_ahead_says_the_next_writer_puts_back_only_a_copy_it_can(moved_aside, tmp_path):
    """Outside review F5: the refusal always said "its next writer puts it back". A dead carrier's copy with
    nothing at the table's path: it does. Once a table was made at the path since, no writer can (the put-back
    is refused): said so, with where the rows are. The look changes nothing either way."""
    from pypaimon import CatalogFactory, Schema
    import pyarrow as pa

    warehouse, path, tombstone = moved_aside
    assert "the table's next writer puts it back" in _refusal_ahead(warehouse, tmp_path)
    catalog = CatalogFactory.create({"warehouse": warehouse})       # made outside SeaTide, empty
    catalog.create_table("db.t", Schema.from_pyarrow_schema(pa.schema([("id", pa.int64())])), False)
    before = _tree(warehouse)
    refusal = _refusal_ahead(warehouse, tmp_path)
    assert "puts it back" not in refusal and "no writer can put it back" in refusal, refusal
    assert tombstone in refusal and path in refusal, refusal
    assert _tree(warehouse) == before, "a check ahead changed the warehouse"


def test_the_refusal_ahead_names_a_live_carrier_that_may_drop_the_copy(moved_aside, tmp_path):
    """A carrier that holds the table's lock alone (asking whether it may drop the copy) drops it or puts it
    back: said so, not that the next writer puts it back."""
    from seatide.connectors.paimon.table_lock import TableLock

    warehouse, path, tombstone = moved_aside
    with TableLock(path, True, "RECREATE_SCHEMA of db.t"):
        refusal = _refusal_ahead(warehouse, tmp_path)
    assert "RECREATE_SCHEMA of db.t (process" in refusal and "drops it or puts it back" in refusal, refusal
    assert "next writer" not in refusal, refusal
