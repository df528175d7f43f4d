"""Outside review of a7e109b..db1751c, F6: restore.resume_job asks `all(p.finished for p in pipelines)` over the config's
pipelines only, before it looks at those the config leaves out (`gone`). Pipeline 1 FINISHED, pipeline 2 still
running when the job was cancelled; a resume whose config leaves pipeline 2 out is refused saying the job "ended
CANCELED with every pipeline FINISHED; there is nothing to resume (submit it again to rerun it)": pipeline 2 is
not FINISHED (its checkpoint has rows to go on from), and the way on named reruns pipeline 1, writing its rows
again. The refusal store/left_out.py promises (naming the pipeline left out, put it back) is never reached."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from seatide.store import schema as s
from seatide.store.jobs import JobRefused
from tests.store.test_savepoint_restores_pipeline_left_out_since import ONE, TWO, _cancelled, _resume
from tests.store.test_store import store, submit  # noqa: F401  (store is a fixture)
from tests.stores import sqlite_only

pytestmark = sqlite_only


def test_leaving_out_the_only_unfinished_pipeline_is_refused_naming_it(store, tmp_path):
    submit(store, tmp_path, text=TWO)
    with store.write() as conn:
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "j1", s.pipelines.c.pipeline_id == 1)
                     .values(status="FINISHED"))
    _cancelled(store)
    with pytest.raises(Exception) as refused:
        _resume(store, ONE)
    message = str(refused.value)
    print(type(refused.value).__name__, message)
    assert not (isinstance(refused.value, JobRefused) and "every pipeline FINISHED" in message), (
        f"pipeline 2 (not FINISHED) is left out, yet: {message}")
    assert "leaves out pipeline 2" in message, message
    assert "--fallback fresh" not in message, f"left out, nothing would run: {message}"
