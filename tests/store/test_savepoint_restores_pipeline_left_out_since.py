"""`resume --from N` where savepoint N holds a pipeline that a later resume's config left out (outside review
of 7d56489..26756a7, F1). The savepoint holds that pipeline's copy: the resume restores it from there, as every
pipeline it holds, checking that copy; it was refused advising --fallback fresh, which started it from nothing
and wrote again the rows it committed up to the savepoint."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest
from sqlalchemy import insert, select, update

from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan
from seatide.store import schema as s
from seatide.store.job_ids import RestoreRefused
from seatide.store.restore import resume_job, savepoint_dir
from seatide.runtime.commit_log import write_json_atomic
from tests.store.test_store import store, submit  # noqa: F401  (store is a fixture)
from tests.stores import sqlite_only

pytestmark = sqlite_only

TWO = """env { checkpoint.interval = 1000 }
source {
  LocalFile { plugin_output = "a", path = "/tmp/in_a", file_format_type = "parquet" }
  LocalFile { plugin_output = "b", path = "/tmp/in_b", file_format_type = "parquet" }
}
sink {
  Console { plugin_input = "a" }
  Console { plugin_input = "b" }
}
"""
ONE = """env { checkpoint.interval = 1000 }
source { LocalFile { plugin_output = "a", path = "/tmp/in_a", file_format_type = "parquet" } }
sink { Console { plugin_input = "a" } }
"""


def _rows(store, incarnation=None):
    with store.read() as conn:
        job = conn.execute(select(s.jobs).where(s.jobs.c.job_id == "j1")).one()
        return job, {p.pipeline_id: p for p in conn.execute(select(s.pipelines).where(
            s.pipelines.c.job_id == "j1", s.pipelines.c.incarnation == (incarnation or job.incarnation)))}


def _state(path: str, lineage: str, fingerprint: str, batch: int) -> None:
    os.makedirs(os.path.join(path, "spark", "offsets"), exist_ok=True)
    with open(os.path.join(path, "spark", "offsets", str(batch)), "w") as handle:
        handle.write(f"v1\n{{}}\n{{\"batch\": {batch}}}\n")
    write_json_atomic(os.path.join(path, "seatide.json"),
                      {"lineage": lineage, "fingerprint": fingerprint, "micro_batch": True})


def _cancelled(store):
    with store.write() as conn:
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(status="CANCELED", finished_at=time.time()))


def _resume(store, text, **kwargs):
    return resume_job(store, "j1", plan=build_plan(load_job_text(text)), text=text, variables={}, **kwargs)


def _setup(store, tmp_path):
    submit(store, tmp_path, text=TWO)
    plan = build_plan(load_job_text(TWO))
    _, pipelines = _rows(store)
    assert sorted(pipelines) == [1, 2]
    with store.write() as conn:
        for p in plan.pipelines:
            directory = pipelines[p.pipeline_id].checkpoint_dir
            _state(directory, f"l{p.pipeline_id}", p.fingerprint(), 3)
            _state(savepoint_dir(directory, 5), f"l{p.pipeline_id}", p.fingerprint(), 3)
            conn.execute(insert(s.checkpoints).values(
                job_id="j1", incarnation=1, checkpoint_id=p.pipeline_id + 2, pipeline_id=p.pipeline_id, batch_id=3, kind="CHECKPOINT",
                status="COMPLETED", created_at=time.time(), duration_ms=1, rows=0,
                source_offsets=json.dumps({"batch": 3}), fingerprint=p.fingerprint(), attempt_id=1))
        conn.execute(insert(s.checkpoints).values(      # the job stopped with savepoint 5: both pipelines at batch 3
            job_id="j1", incarnation=1, checkpoint_id=5, pipeline_id=0, batch_id=3, kind="SAVEPOINT",
            status="COMPLETED", created_at=time.time(), duration_ms=1, rows=0,
            source_offsets=json.dumps({"pipelines": {"1": 3, "2": 3}}), fingerprint="", attempt_id=1))
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "j1").values(last_batch_id=3))
    _cancelled(store)
    # incarnation 2: the user resumed with a config that leaves pipeline 2 out (the refusal's way: --fallback fresh)
    _resume(store, ONE, fallback="fresh")
    _cancelled(store)
    _, now = _rows(store)
    assert sorted(now) == [1]
    return pipelines


@pytest.mark.parametrize("fallback", [None, "fresh"])
def test_resume_from_a_savepoint_restores_a_pipeline_it_holds_that_a_config_left_out_since(store, tmp_path, fallback):
    pipelines = _setup(store, tmp_path)
    _resume(store, TWO, savepoint_id=5, fallback=fallback)      # accepted: nothing to fall back from
    job, now = _rows(store)
    restore = json.loads(job.restore)
    assert restore["prepare"] == {str(pid): savepoint_dir(pipelines[pid].checkpoint_dir, 5) for pid in (1, 2)}, restore
    assert restore["fresh"] == [], restore
    assert now[2].checkpoint_dir == pipelines[2].checkpoint_dir and now[2].last_batch_id == 3


@pytest.mark.parametrize("fallback", [None, "fresh"])
def test_its_missing_copy_refuses_the_resume_whatever_the_fallback(store, tmp_path, fallback):
    pipelines = _setup(store, tmp_path)
    copy = savepoint_dir(pipelines[2].checkpoint_dir, 5)
    shutil.rmtree(copy)
    with pytest.raises(RestoreRefused) as refused:
        _resume(store, TWO, savepoint_id=5, fallback=fallback)
    message = str(refused.value)
    assert f"cannot resume job j1 from savepoint 5: its copy of pipeline 2 ({copy}) is missing" in message, message
    assert "--fallback fresh" not in message, message
    job, _ = _rows(store)
    assert job.incarnation == 2, "nothing recorded"


def test_a_plain_resume_refusing_it_names_no_savepoint(store, tmp_path):
    """The plain resume has no checkpoint of it to go on from (started from nothing, it writes its rows again):
    its refusal names leaving it out again, and no savepoint, though savepoint 5 holds it: a sink commits a batch
    before its checkpoint row, so no row tells that none was committed after it (review of a7e109b..db1751c, F3)."""
    _setup(store, tmp_path)
    with pytest.raises(RestoreRefused) as refused:
        _resume(store, TWO)
    message = str(refused.value)
    assert "pipeline 2: the job had it until incarnation 1" in message, message
    assert "a way on that writes none twice: leave it out again" in message, message
    assert "--from" not in message, message
