"""Paimon's RECREATE_SCHEMA against a zombie: the decided table is dropped once, never the one its
replacement made since (review of the sinks, finding 2). The contract suite's zombie cases hold a
driver at the protocol's steps; this one holds it inside Paimon's destroy, after its last fence.
"""

from __future__ import annotations

import pytest

from seatide.store.db import AttemptFenced, open_store
from tests.contract.harness import Pipeline, Zombie, rows
from tests.contract.systems import PaimonSystem

pytestmark = pytest.mark.spark

OLD = [900, 901]          # rows in the table before the job: not the job's


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    st = open_store(f"sqlite:///{tmp_path_factory.mktemp('paimon-recreate-store')}/state.db")
    yield st
    st.dispose()


def test_a_zombie_held_inside_recreate_schema_never_drops_its_replacements_table(spark, store, tmp_path,
                                                                                  monkeypatch):
    """Purpose: RECREATE_SCHEMA's drop is conditional on the table the job decided to drop: a
    zombie that passed its fence and the identity check, then paused, never drops the table its
    replacement recreated and committed batches into.

    How: a table with rows from before the job; attempt 1 runs batch 0 with RECREATE_SCHEMA and is
    held at ``paimon.before_drop`` (after ``fence()``, before the drop); attempt 2 replaces it and
    writes batches 0 and 1; then the zombie is let go.
    Passing: the table holds batches 0 and 1 (none of the old rows); the zombie ended fenced.
    """
    system = PaimonSystem(str(tmp_path))
    pipeline = Pipeline(store, str(tmp_path / "checkpoints"))
    target, options = system.new_target(), {"schema_save_mode": "RECREATE_SCHEMA"}
    system.put(target, OLD)
    zombie_attempt = pipeline.attempt()
    zombie = Zombie("paimon.before_drop", str(tmp_path / "gate"), monkeypatch,
                    lambda: pipeline.open(zombie_attempt, system.sink(target, **options), spark)
                    .write(rows(spark, [1, 2]), 0))
    run = pipeline.open(pipeline.attempt(), system.sink(target, **options), spark)
    run.write(rows(spark, [1, 2]), 0)
    run.write(rows(spark, [3]), 1)
    outcome = zombie.release()
    assert system.read(target) == [1, 2, 3], "the zombie dropped the table its replacement recreated"
    assert isinstance(outcome.get("error"), AttemptFenced), outcome
