"""A resume with the same job written another way: in SeaTunnel's JSON form (``job_as_json``, what
``seatunnel --encrypt/--decrypt`` prints) or with its options shaded. The pipeline fingerprint is
over what a source is, not how it is spelled (plan/source_identity.py): such a resume is no change,
so a plain resume goes on and ``--fallback fresh`` starts no FINISHED pipeline over (whose
exactly-once sink would receive every row again). A checkpoint written under the fingerprint of
the version before still fits. Set up as tests/store/test_finished_changed.py: store steps only.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from seatide import intents
from seatide.api.rest import create_app
from seatide.config.loader import job_as_json, load_job_text
from seatide.config.shade import encrypt_config
from seatide.plan.dag import build_plan
from seatide.store import schema as s
from seatide.testing.jobs import batch_job
from tests.store.test_finished_changed import _pipeline_1_finished_then_cancelled, _resume, _statuses
from tests.store.test_owed_prepare import _cancel, _job, leader  # noqa: F401  leader
from tests.plan.test_source_identity import _written_fingerprint
from tests.stores import sqlite_only

pytestmark = sqlite_only


def _as_json(text: str) -> str:
    return json.dumps(job_as_json(text))


def _encrypted(text: str, split_num: str = "4") -> str:
    """``seatunnel --encrypt``'s output for ``text`` with a base64 shade over ``split.num`` too (a
    shaded option is a string: "4" where the job in clear says 4), in clear first ``split_num``."""
    tree = job_as_json(text)
    tree["env"]["shade"] = {"identifier": "base64", "options": ["split.num"]}
    for block in tree["source"]:
        block["split"]["num"] = split_num
    return json.dumps(encrypt_config(tree))


def _with_password(text: str) -> str:
    return text.replace('sequence.field = "seq"', 'sequence.field = "seq"\n    password = "pw"')


@pytest.mark.parametrize("fallback", [None, "fresh"])
def test_the_same_job_in_its_json_form_resumes_with_its_finished_pipeline_finished(leader, tmp_path, fallback):
    store, text = _pipeline_1_finished_then_cancelled(leader, tmp_path)
    _resume(store, _as_json(text), fallback=fallback)
    assert _statuses(store) == [(2, 1, "FINISHED"), (2, 2, "CREATED")]
    assert json.loads(_job(store).restore)["fresh"] == []


@pytest.mark.parametrize("fallback", [None, "fresh"])
def test_the_same_job_encrypted_resumes_with_its_finished_pipeline_finished(leader, tmp_path, fallback):
    store, _ = _pipeline_1_finished_then_cancelled(leader, tmp_path)
    clear = _with_password(batch_job(str(tmp_path / "out"), pipelines=2))
    _set_fingerprints(store, build_plan(load_job_text(clear)))        # submitted in clear
    _resume(store, _encrypted(clear), fallback=fallback)
    assert _statuses(store) == [(2, 1, "FINISHED"), (2, 2, "CREATED")]
    assert json.loads(_job(store).restore)["fresh"] == []


def test_a_real_change_of_a_shaded_option_is_still_a_change(leader, tmp_path):
    store, _ = _pipeline_1_finished_then_cancelled(leader, tmp_path)
    clear = _with_password(batch_job(str(tmp_path / "out"), pipelines=2))
    _set_fingerprints(store, build_plan(load_job_text(clear)))
    changed = _encrypted(clear, split_num="5")
    assert base64.b64encode(b"5").decode() in changed
    with pytest.raises(intents.Refusal, match=r"pipeline 1: .*sources changed"):
        intents.resume(store, "j1", text=changed, actor="test")


def test_a_checkpoint_under_the_fingerprint_of_the_version_before_still_fits(leader, tmp_path):
    store, text = _pipeline_1_finished_then_cancelled(leader, tmp_path)
    plan = build_plan(load_job_text(text))
    with store.write() as conn:      # as the version before wrote them: over the blocks as written
        for pipeline in plan.pipelines:
            conn.execute(update(s.pipelines).where(s.pipelines.c.pipeline_id == pipeline.pipeline_id)
                         .values(fingerprint=_written_fingerprint(pipeline)))
    _resume(store, _as_json(text), fallback="fresh")
    assert _statuses(store) == [(2, 1, "FINISHED"), (2, 2, "CREATED")]


def test_a_checkpoint_of_the_version_before_fits_the_job_encrypted_since(leader, tmp_path):
    """Review 4, F2: the version before fingerprinted the blocks as written, the password and split.num
    in clear; after the upgrade the job comes back base64-encrypted (ciphertext where there was clear text)."""
    store, _ = _pipeline_1_finished_then_cancelled(leader, tmp_path)
    clear = _with_password(batch_job(str(tmp_path / "out"), pipelines=2)).replace("split.num = 4", 'split.num = "4"')
    _set_fingerprints(store, build_plan(load_job_text(clear)), _written_fingerprint)
    _resume(store, _encrypted(clear))
    assert _statuses(store) == [(2, 1, "FINISHED"), (2, 2, "CREATED")]


def test_a_resume_names_each_pipeline_it_starts_over_in_its_answer(leader, tmp_path):
    store, text = _pipeline_1_finished_then_cancelled(leader, tmp_path)
    changed = text.replace("row.num = 100", "row.num = 150", 1)       # pipeline 1's FakeSource only
    accepted = intents.resume(store, "j1", text=changed, fallback="fresh", actor="test")
    fresh = [w for w in accepted.warnings if "starts over" in w]
    assert len(fresh) == 1 and fresh[0].startswith("pipeline 1: starts over")
    assert "sources changed" in fresh[0]


def test_the_rest_answer_and_the_cli_name_the_pipeline_started_over(leader, tmp_path, store_url):
    store, text = _pipeline_1_finished_then_cancelled(leader, tmp_path)
    changed = text.replace("row.num = 100", "row.num = 150", 1)
    http = TestClient(create_app(store, str(tmp_path), "test-node"), raise_server_exceptions=False)
    response = http.post("/api/v1/jobs/j1/resume", json={"config": changed, "fallback": "fresh"})
    assert response.status_code == 200, response.text
    assert [w.split(",")[0] for w in response.json()["warnings"]] == ["pipeline 1: starts over"]
    _cancel(leader[0], store)
    (tmp_path / "again.conf").write_text(changed.replace("row.num = 100", "row.num = 170", 1))  # pipeline 2's
    cli = subprocess.run([sys.executable, "-m", "seatide.cli.main", "resume", "j1", "--store", store_url,
                          "--config", str(tmp_path / "again.conf"), "--fallback", "fresh"],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert "seatide: warning: pipeline 2: starts over, its checkpoint not restored: " in cli.stderr
    assert "job j1 resumed" in cli.stdout


def _set_fingerprints(store, plan, fingerprint=lambda pipeline: pipeline.fingerprint()) -> None:
    with store.write() as conn:
        for pipeline in plan.pipelines:
            conn.execute(update(s.pipelines).where(s.pipelines.c.pipeline_id == pipeline.pipeline_id)
                         .values(fingerprint=fingerprint(pipeline)))
