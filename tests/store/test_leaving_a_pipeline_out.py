"""A resume whose config leaves a pipeline out (store/left_out.py). Outside review of b5aba34..HEAD, R4: the
missing pipeline's problem was put on the first pipeline of the plan, so the only way on was `--fallback fresh`,
which started *that* pipeline, whose checkpoint is sound, over from nothing: its sinks got their save modes anew
and its rows were written again. Now the plain resume is refused naming the pipeline left out, and `--fallback
fresh` leaves it out on purpose, starting no other pipeline over."""

from __future__ import annotations

import json

import pytest

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


def test_a_plain_resume_leaving_a_pipeline_out_is_refused_naming_it_and_the_ways_on(store, tmp_path):
    """Refused, nothing recorded: the pipeline left out is named, with its ways on (put it back, or leave it out
    on purpose with --fallback fresh); the sound pipeline is not called a problem, nor offered a start over."""
    from seatide.store.job_ids import RestoreRefused
    from tests.store.test_savepoint_restores_pipeline_left_out_since import ONE, TWO, _cancelled, _resume, _rows

    submit(store, tmp_path, text=TWO)
    _cancelled(store)
    with pytest.raises(RestoreRefused) as refused:
        _resume(store, ONE)
    message = str(refused.value)
    assert message.startswith("cannot resume job j1: this config leaves out pipeline 2 of the job"), message
    assert "put it back in the config" in message and "`seatide resume j1 --fallback fresh`" in message, message
    assert "pipeline 1:" not in message and "start those pipelines over" not in message, message
    job, _ = _rows(store)
    assert job.incarnation == 1, "nothing recorded"
