"""A batch another job staged and never decided does not block a RECREATE_SCHEMA for ever; a decided
one still does (``pending_batches``).

Before: every record of another job's staged batch refused a RECREATE_SCHEMA until that job committed
the batch or an operator removed the record by hand, though a batch whose stager failed or died before
its decision is never decided later (the next attempt stages it afresh) and protects nothing.

A real pypaimon filesystem warehouse in a temp dir; the other job's writer is a real process
SIGKILLed at a failpoint (``kill``): its hold of the table's lock goes with it, its record stays."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from seatide import failpoints
from seatide.connectors.paimon.warehouse import PaimonError
from tests.connectors.test_paimon_recreate_lock import DEADLINE, _ids, _rows, _table, _target, recreate

OTHER = "T_job_2_0_0_L_"     # another job's commit user (job job_2)

# The other job's writer: batch 1 (10) staged; ``decide``: its part marked deciding, then published.
_WRITER = """
import sys
from tests.connectors.test_paimon_recreate_lock import _rows, _target
writer = _target(sys.argv[1])
part = writer.stage_arrow(_rows(10), sys.argv[2], 1)
if sys.argv[3] == "decide":
    writer.deciding(part)
    writer.publish(part)
"""


def _killed_writer(warehouse: str, point: str, decide: bool) -> None:
    """The other job's writer run in a process of its own and SIGKILLed at ``point``."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    killed = subprocess.run([sys.executable, "-c", _WRITER, warehouse, OTHER, "decide" if decide else "stage"],
                            cwd=root, env={**os.environ, failpoints.POINTS_ENV: f"{point}=kill"}, timeout=DEADLINE,
                            capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr[-2000:]


def _pending(warehouse: str) -> list[str]:
    return sorted(os.listdir(os.path.join(warehouse, "db.db", ".t.seatide-pending")))


def test_a_recreate_clears_the_record_of_a_writer_killed_before_its_decision(tmp_path):
    """Job 2's driver is SIGKILLed right after staging batch 1 (``paimon.staged``), before any decision:
    job 1's RECREATE_SCHEMA takes the table's lock alone, so no writer is between staging and its decision;
    the record is cleared and the table dropped."""
    warehouse, decided = _table(tmp_path)
    _killed_writer(warehouse, "paimon.staged", decide=False)
    assert len(_pending(warehouse)) == 1, _pending(warehouse)
    recreate(warehouse, decided, True)
    assert _ids(warehouse) is None, "the decided table was not dropped"
    assert _pending(warehouse) == [], "the undecided batch's record stayed"


def test_a_recreate_refuses_over_a_batch_marked_deciding_whose_writer_was_killed(tmp_path):
    """Job 2's part is marked deciding (right before its store's decision), its driver SIGKILLed right
    before Paimon's commit: the batch may be decided, its replay commits it; refused, nothing destroyed."""
    warehouse, decided = _table(tmp_path)
    _killed_writer(warehouse, "paimon.before_commit", decide=True)
    with pytest.raises(PaimonError, match="another job has staged a batch and not committed it yet") as refused:
        recreate(warehouse, decided, True)
    assert "batch 1 of job" in str(refused.value) and "resume that job" in str(refused.value), refused.value
    assert _ids(warehouse) == [1, 2]
    assert len(_pending(warehouse)) == 1, _pending(warehouse)


def test_a_zombie_staging_a_batch_again_leaves_its_replacements_mark(tmp_path):
    """Job 2's replacement stages batch 1 and marks it deciding; its zombie (one commit user) stages batch 1
    again and fails; the replacement's driver is gone before the commit: refused. With one record per batch
    the zombie's overwrote the mark, and the decided batch was dropped."""
    warehouse, decided = _table(tmp_path)
    replacement = _target(warehouse)
    replacement.deciding(replacement.stage_arrow(_rows(10), OTHER, 1))
    zombie = _target(warehouse)
    zombie.stage_arrow(_rows(10), OTHER, 1)
    zombie.let_go()                 # its batch failed before its decision (its fence refused it)
    replacement.let_go()            # its hold gone with its driver, after its decision
    with pytest.raises(PaimonError, match="another job has staged a batch and not committed it yet"):
        recreate(warehouse, decided, True)
    assert _ids(warehouse) == [1, 2]
    assert len(_pending(warehouse)) == 1, "the zombie's record stayed, or the mark went"


def test_a_marked_batch_above_its_users_newest_commit_still_blocks(tmp_path):
    """Job 2 committed batch 1, then staged batch 2 and marked it deciding; its driver is gone before the
    commit. The rule that removes a record at or below its user's newest commit (a zombie's, staged after
    its replacement committed the batch) must keep this one: batch 2 may be decided. Refused."""
    warehouse, decided = _table(tmp_path)
    writer = _target(warehouse)
    first = writer.stage_arrow(_rows(10), OTHER, 1)
    writer.deciding(first)
    writer.publish(first)                                   # snapshot 2: job 2's batch 1
    writer.deciding(writer.stage_arrow(_rows(11), OTHER, 2))
    writer.let_go()                                         # its hold gone with its driver, after its decision
    carrier = _target(warehouse)
    carrier.destroy_owed = lambda carried_out: True
    with pytest.raises(PaimonError, match="another job has staged a batch and not committed it yet") as refused:
        carrier.destroy({"recreate": decided, "held": 2, "own": "T_job_1_"}, lambda: None)   # decided after batch 1
    assert "batch 2 of job" in str(refused.value), refused.value
    assert _ids(warehouse) is not None and len(_pending(warehouse)) == 1, _pending(warehouse)


def test_a_recreate_removes_a_record_half_written_by_a_killed_writer(tmp_path):
    """A writer killed mid-write of its record leaves ``<record>.<pid>.tmp``: never read as a record, it
    stayed for ever. A RECREATE (holding the lock alone: nobody writes one) removes it."""
    warehouse, decided = _table(tmp_path)
    writer = _target(warehouse)
    writer.stage_arrow(_rows(10), OTHER, 1)
    writer.let_go()
    half = os.path.join(warehouse, "db.db", ".t.seatide-pending", f"{OTHER}1.abcd1234.4242.tmp")
    with open(half, "w") as f:
        f.write('{"user": "T_jo')
    recreate(warehouse, decided, True)
    assert _ids(warehouse) is None and _pending(warehouse) == [], _pending(warehouse)
