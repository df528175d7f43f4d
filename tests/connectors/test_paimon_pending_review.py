"""Outside review of 0dfb7e2 (Paimon pending-batch records marked deciding): demonstrations.

Each test asserts what SeaTide promises; each but the control failed on 0dfb7e2 and passes since
the review's fixes (a record is stale once its user's newest commit reaches its batch id).
A real pypaimon filesystem warehouse in a temp dir; a writer killed is a real process SIGKILLed
at a failpoint (``_killed_writer``)."""

from __future__ import annotations

import os

import pytest

from seatide.connectors.paimon.warehouse import PaimonError
from tests.connectors.test_paimon_pending_batches import OTHER, _killed_writer, _pending
from tests.connectors.test_paimon_recreate_lock import USER, _ids, _rows, _table, _target


def _carry_out(warehouse: str, decided: dict, held: int) -> None:
    """Job 1's RECREATE_SCHEMA, decided when the table's newest snapshot was ``held``, carried out."""
    carrier = _target(warehouse)
    carrier.destroy_owed = lambda carried_out: True
    carrier.destroy({"recreate": decided, "held": held, "own": "T_job_1_"}, lambda: None)


def test_a_zombie_staging_after_its_replacement_committed_does_not_block_other_jobs_recreate(tmp_path):
    """Job 2's zombie looked for batch 1's decision (none yet), then ran its Spark work while its
    replacement staged, decided and committed batch 1 (job 2's last batch: the job ends). The zombie
    then stages batch 1, marks its record deciding and is refused by its fence at the store's decision.
    Its record's base is after the replacement's commit, so ``blocking`` never sees it committed and
    nothing of job 2 ever removed it: every later RECREATE_SCHEMA of another job on the table was refused
    ("resume that job") though nothing of job 2 is undecided. Now the record is stale: its user's newest
    commit in the table reaches its batch id."""
    warehouse, _ = _table(tmp_path)
    replacement = _target(warehouse)
    part = replacement.stage_arrow(_rows(10), OTHER, 1)
    replacement.deciding(part)
    replacement.publish(part)                     # snapshot 2: job 2's batch 1, its record removed
    assert _pending(warehouse) == []
    zombie = _target(warehouse)
    zombie.deciding(zombie.stage_arrow(_rows(10), OTHER, 1))
    zombie.let_go()                               # the store's decision refused it (fenced)
    from seatide.connectors.paimon import table_setup
    from seatide.connectors.paimon.warehouse import get_table, open_catalog
    decided = table_setup.identity(get_table(open_catalog(warehouse), "db", "t"))
    _carry_out(warehouse, decided, held=2)        # job 1 decided after job 2's commit
    assert _ids(warehouse) is None, "refused over a zombie's record of a batch committed by its replacement"


def test_a_committed_batchs_record_with_an_expired_snapshot_refuses_naming_the_record_and_a_way_on(tmp_path):
    """Job 2's writer is SIGKILLed right after Paimon's commit of its batch 1 (snapshot 2), before it
    removes its record. Job 1 commits snapshots 3, 4; snapshots 1 and 2 expire (Paimon's retention;
    deleted here as its expiration deletes them). Job 1 decides RECREATE_SCHEMA at snapshot 4, so no
    snapshot since is another job's; ``blocking`` asks whether job 2's batch was committed after its base
    (snapshot 1), hits the expired snapshot 2 and raises ``commits.committed``'s error: "keep more
    snapshots" (too late: they are gone), naming neither the record, nor that the RECREATE is refused and
    nothing destroyed, nor a way on. Whether it was committed cannot be known now, so it still refuses,
    but naming the record, saying nothing was destroyed and how to go on."""
    warehouse, _ = _table(tmp_path)
    _killed_writer(warehouse, "paimon.after_commit", decide=True)
    assert len(_pending(warehouse)) == 1
    writer = _target(warehouse)
    for batch in (1, 2):
        writer.publish(writer.stage_arrow(_rows(20 + batch), USER, batch))     # snapshots 3, 4 by job 1
    snapshots = os.path.join(warehouse, "db.db", "t", "snapshot")
    for old in (1, 2):
        os.remove(os.path.join(snapshots, f"snapshot-{old}"))
    with open(os.path.join(snapshots, "EARLIEST"), "w") as f:
        f.write("3")
    from seatide.connectors.paimon import table_setup
    from seatide.connectors.paimon.warehouse import get_table, open_catalog
    decided = table_setup.identity(get_table(open_catalog(warehouse), "db", "t"))
    with pytest.raises(PaimonError) as refused:
        _carry_out(warehouse, decided, held=4)
    message = str(refused.value)
    assert "seatide-pending" in message and "Nothing was destroyed" in message, message


def test_a_marked_record_of_a_committed_batch_is_stale(tmp_path):
    """Control (passes): the stale-commit path for a MARKED record, which the existing
    ``test_a_recreate_removes_the_record_of_a_batch_committed_before_its_decision`` no longer reaches
    (its writer never marks, so its record is removed as never decided since 0dfb7e2)."""
    warehouse, decided = _table(tmp_path)
    _killed_writer(warehouse, "paimon.after_commit", decide=True)
    _carry_out(warehouse, decided, held=2)
    assert _ids(warehouse) is None and _pending(warehouse) == []


def test_deciding_after_the_hold_was_let_go_refuses_instead_of_marking_a_dropped_batch(tmp_path):
    """Latent (no current SinkRun path lets go between stage and ``deciding``): ``deciding`` re-takes a
    hold it lost instead of refusing. Between the let-go and the re-take another job's RECREATE removed the
    unmarked record and dropped the table with the staged files; ``deciding`` then writes a fresh marked
    record and returns, so the batch would be decided and its publish fail for good ("dropped since")."""
    warehouse, decided = _table(tmp_path)
    writer = _target(warehouse)
    part = writer.stage_arrow(_rows(10), OTHER, 1)
    writer.let_go()
    _carry_out(warehouse, decided, held=1)
    assert _ids(warehouse) is None                 # dropped, with the staged files
    with pytest.raises(PaimonError):
        writer.deciding(part)
