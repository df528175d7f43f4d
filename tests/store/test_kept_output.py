"""A destructive save mode decided now never empties rows a pipeline that is not started over keeps
(store/kept_output.py; outside review of c33655f, F2).

The end-to-end story (FINISHED with 900 of 1800 rows before, refused at the door now) is
tests/e2e/test_backup_before_another_pipelines_drop.py; here, on both stores, whose rows count: a
pipeline's that is not started over (FINISHED, or carried on from its checkpoint), by its decisions
in the store or its directory's commit marks, and any pipeline's in this incarnation. Set up as
tests/store/test_decided_batches.py: the store's and the leader's own steps, no worker.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
from sqlalchemy import insert, update

from seatide import intents
from seatide.runtime.commit_log import write_json_atomic
from seatide.store import schema as s
from seatide.store.kept_output import kept_output
from tests.store.test_decided_batches import _decided, _decided_then_cancelled
from tests.store.test_owed_prepare import _job, _pipeline, leader  # noqa: F401  leader

both_stores = pytest.mark.parametrize("store_url", ["sqlite", "postgresql"], indirect=True)


def _targets(store, target: str) -> None:
    """Pipeline 1's decided batches name ``target``, as a file sink's manifests do."""
    m = s.sink_manifests
    with store.write() as conn:
        conn.execute(update(m).where((m.c.job_id == "j1") & (m.c.batch_id >= 0)).values(manifest=json.dumps(
            {"publish": {"targets": {target: {"moves": []}}}, "state": {}})))


def _started_over(store, directory: str) -> None:
    """A fresh start of pipeline 1: its directory lost (a problem), resumed with --fallback fresh."""
    shutil.rmtree(directory)
    intents.resume(store, "j1", fallback="fresh", actor="t")
    assert json.loads(_job(store).restore)["prepare"] == {"1": None}


def _kept(store, target: str) -> str | None:
    with store.read() as conn:
        return kept_output(conn, "j1", 1, target)


def _finished_pipeline_2(store, tmp_path, target: str, older_state: dict | None = None) -> None:
    """A second pipeline, FINISHED in this incarnation, whose sink marked a batch that wrote ``target``
    (a sink that commits in its own system decides nothing in the store: its marks are the record).
    ``older_state``: the mark an earlier SeaTide wrote instead (a bare state, no lineage)."""
    directory = str(tmp_path / "p2")
    meta = {"lineage": "m1", "fingerprint": "f"} if older_state is None else {"fingerprint": "f"}
    write_json_atomic(os.path.join(directory, "seatide.json"), meta)
    write_json_atomic(os.path.join(directory, "sinks", "sink-0", "commit", "0.json"), older_state or
                      {"seatide.lineage": "m1", "state": {"rows": 3, "targets": {target: {"rows": 3}}}})
    row = _pipeline(store)
    with store.write() as conn:
        conn.execute(insert(s.pipelines).values(
            job_id="j1", incarnation=row.incarnation, pipeline_id=2, status="FINISHED", fingerprint="f",
            checkpoint_dir=directory, rows_read=3, rows_written=3, idle=False))


@both_stores
def test_a_fresh_start_destroys_only_what_the_pipelines_started_over_wrote(leader, tmp_path):
    _, store, directory = _decided_then_cancelled(leader, tmp_path, 0)
    _targets(store, "/out")
    _started_over(store, directory)
    assert _kept(store, "/out") is None            # pipeline 1 starts over: it writes its rows again
    _finished_pipeline_2(store, tmp_path, "/out")
    message = _kept(store, "/out")
    assert message and "target /out is shared: pipeline 2, which FINISHED" in message, message
    assert "DROP_DATA" in message and "as a new job" in message and "APPEND_DATA" in message, message
    assert _kept(store, "/elsewhere") is None      # pipeline 2 never wrote there


@both_stores
def test_rows_kept_by_the_pipeline_itself_count(leader, tmp_path):
    """Resumed plainly, pipeline 1 carries its batches on: emptying them loses them. Started over, its
    new lineage's batches of this incarnation (another sink's, first at the target) count too."""
    _, store, _ = _decided_then_cancelled(leader, tmp_path, 0)
    _targets(store, "/out")
    intents.resume(store, "j1", actor="t")
    assert "pipeline 1 itself" in (_kept(store, "/out") or "")


@both_stores
def test_a_started_over_pipelines_batches_of_this_incarnation_count(leader, tmp_path):
    _, store, directory = _decided_then_cancelled(leader, tmp_path, 0)
    _started_over(store, directory)
    assert _kept(store, "/out") is None
    _decided(store, 0, lineage="l2")
    _targets(store, "/out")
    assert "pipeline 1 itself" in (_kept(store, "/out") or "")
