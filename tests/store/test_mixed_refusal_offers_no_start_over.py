"""Outside review of a7e109b..db1751c, F1: a refusal whose problems mix a pipeline brought back (its start over writes
again the rows it committed: ``rewrites``) with any other problem falls to the generic wording, which offers
`--fallback fresh` for "those pipelines", the brought-back one among them. db1751c names the start over as what
it is only when *every* problem rewrites (unusable_checkpoints._refusal). Followed, the advice starts pipeline 2
from nothing: its committed rows are written again (promises 1 and 2)."""

from __future__ import annotations

import json
import shutil

import pytest

from seatide.store.job_ids import RestoreRefused
from tests.store.test_savepoint_restores_pipeline_left_out_since import TWO, _resume, _rows, _setup
from tests.store.test_store import store, submit  # noqa: F401  (store is a fixture)
from tests.stores import sqlite_only

pytestmark = sqlite_only


def test_a_mixed_refusal_offers_no_start_over_of_the_brought_back_pipeline(store, tmp_path):
    pipelines = _setup(store, tmp_path)        # incarnation 2: config ONE left pipeline 2 out (--fallback fresh)
    shutil.rmtree(pipelines[1].checkpoint_dir)  # and pipeline 1's directory is lost meanwhile
    with pytest.raises(RestoreRefused) as refused:
        _resume(store, TWO)                     # pipeline 2 brought back
    message = str(refused.value)
    print(message)
    assert "pipeline 2: the job had it until incarnation" in message, message
    offers_fresh = "start those pipelines over explicitly with `seatide resume j1 --fallback fresh`" in message
    if offers_fresh:                            # follow the way on, as a user would
        _resume(store, TWO, fallback="fresh")
        job, _ = _rows(store)
        fresh = [e["pipeline"] for e in json.loads(job.restore)["fresh"]]
        pytest.fail(f"the refusal offered --fallback fresh for 'those pipelines':\n{message}\n...followed, it "
                    f"started pipelines {fresh} from nothing: pipeline 2 writes again the rows it committed")
    assert "--fallback fresh` (restore.fallback = fresh)) would write again every row it committed" in message, message
    assert "Fix the others' cause" in message, message
