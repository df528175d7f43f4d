"""Outside review of b5aba34..HEAD, seen in passing (pre-existing, store/restore.py ``gone``): the only way to the
state F1 is about (a resume whose config leaves a pipeline out) is `--fallback fresh`, because the missing
pipeline's problem is put on the first pipeline of the plan. The fallback then starts *that* pipeline, whose
checkpoint is sound, over from nothing: its sinks get their save modes anew and its rows are written again."""

from __future__ import annotations

import json

from sqlalchemy import select

from seatide.store import schema as s
from tests.store.test_savepoint_restores_pipeline_left_out_since import _setup
from tests.store.test_store import store, submit  # noqa: F401  (store is a fixture)
from tests.stores import sqlite_only

pytestmark = sqlite_only


def test_leaving_a_pipeline_out_does_not_start_another_over(store, tmp_path):
    _setup(store, tmp_path)     # incarnation 2: config ONE (pipeline 1 only) with --fallback fresh
    with store.read() as conn:
        restore = json.loads(conn.execute(select(s.jobs.c.restore).where(s.jobs.c.job_id == "j1")).scalar())
    assert restore["fresh"] == [], f"pipeline 1 (checkpoint at batch 3, sound) was started from nothing: {restore}"
