"""A pipeline that FINISHED in the incarnation before and whose sources changed since is no
finished pipeline of the new job definition (store/restore.py): it never read its new sources.

A plain resume refuses, naming it, as it does an unfinished pipeline whose checkpoint was written
for other sources; with --fallback fresh it starts over, and the answer and the
RESTORE_FALLBACK_FRESH event name it (nothing falls back silently). One whose sources did not
change stays FINISHED. Set up as tests/store/test_owed_prepare.py does: the store's and the
leader's own steps, no worker; SQLite only: the store mechanism is not the subject.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select, update

from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan
from seatide.plan.outline import outline_json
from seatide.store import schema as s
from seatide.store.jobs import submit_job
from seatide.store.restore import RestoreRefused, resume_job
from seatide.testing.jobs import batch_job
from tests.store.test_owed_prepare import _cancel, _events, _job, leader  # noqa: F401  leader
from tests.stores import sqlite_only

pytestmark = sqlite_only


def _statuses(store) -> list[tuple[int, int, str]]:
    with store.read() as conn:
        return [tuple(r) for r in conn.execute(select(s.pipelines.c.incarnation, s.pipelines.c.pipeline_id,
                                                      s.pipelines.c.status)
                                               .where(s.pipelines.c.incarnation == _job(store).incarnation)
                                               .order_by(s.pipelines.c.pipeline_id))]


def _resume(store, text: str, **kwargs):
    return resume_job(store, "j1", plan=build_plan(load_job_text(text)), text=text, variables={}, **kwargs)


def _pipeline_1_finished_then_cancelled(leader, tmp_path) -> tuple:
    """Two pipelines; 1 FINISHED (as its driver records it), the job cancelled while 2 had not."""
    coordinator, store = leader
    text = batch_job(str(tmp_path / "out"), pipelines=2)
    config = load_job_text(text)
    submit_job(store, text=text, variables={}, config=config, plan=build_plan(config),
               outline=outline_json(config), data_dir=str(tmp_path), job_id="j1")
    with store.write() as conn:
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "j1", s.pipelines.c.pipeline_id == 1)
                     .values(status="FINISHED"))
    _cancel(coordinator, store)
    return store, text


def test_a_finished_pipeline_whose_sources_changed_starts_over_under_fallback_fresh_and_is_named(leader, tmp_path):
    store, text = _pipeline_1_finished_then_cancelled(leader, tmp_path)
    changed = text.replace("row.num = 100", "row.num = 150", 1)       # pipeline 1's FakeSource only
    with pytest.raises(RestoreRefused, match=r"pipeline 1: .*sources changed") as refused:
        _resume(store, changed)
    assert "pipeline 2" not in str(refused.value)
    _resume(store, changed, fallback="fresh")
    restore = json.loads(_job(store).restore)
    assert _statuses(store) == [(2, 1, "CREATED"), (2, 2, "CREATED")]
    assert [entry["pipeline"] for entry in restore["fresh"]] == [1]
    assert "sources changed" in restore["fresh"][0]["problem"]
    assert restore["prepare"] == {"1": None}                # its old directory is set aside
    assert [e["pipeline"] for e in _events(store, "RESTORE_FALLBACK_FRESH")] == [1]


def test_a_finished_pipeline_whose_sources_did_not_change_stays_finished(leader, tmp_path):
    store, text = _pipeline_1_finished_then_cancelled(leader, tmp_path)
    _resume(store, text)
    assert _statuses(store) == [(2, 1, "FINISHED"), (2, 2, "CREATED")]
    assert json.loads(_job(store).restore)["fresh"] == []
