"""Outside review of 7d56489..HEAD: `resume --from N` where N holds a pipeline that a later resume's config
left out. The savepoint holds that pipeline's copy, yet the resume starts it from nothing (--fallback fresh)
or is refused advising --fallback fresh: both write again the rows it committed up to the savepoint."""

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


def test_resume_from_a_savepoint_restores_a_pipeline_it_holds_that_a_config_left_out_since(store, tmp_path):
    pipelines = _setup(store, tmp_path)
    copy = savepoint_dir(pipelines[2].checkpoint_dir, 5)
    assert os.path.isdir(copy)
    advised_fresh = False
    try:
        _resume(store, TWO, savepoint_id=5)
    except RestoreRefused as exc:
        message = str(exc)
        print("REFUSAL:", message)
        advised_fresh = "--fallback fresh" in message
    _resume(store, TWO, savepoint_id=5, fallback="fresh")
    job, _ = _rows(store)
    restore = json.loads(job.restore)
    print("RESTORE:", restore)
    assert restore["prepare"].get("2") == copy and not advised_fresh, (
        f"savepoint 5 holds pipeline 2 at batch 3 ({copy}), yet --from 5 --fallback fresh starts it from nothing: "
        f"{restore}")
