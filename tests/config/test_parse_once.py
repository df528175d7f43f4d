"""A job's text is parsed once per process: the loader's validation, its secrets, its outline,
its Spark settings and the masked config an API answer shows all come from one tree."""

from __future__ import annotations

import json

import pytest

import seatide.config.job_text as job_text
from seatide import intents
from seatide.config.loader import load_job_env, load_job_text
from seatide.plan.outline import stored_outline
from seatide.secrets import MASK, secret_values
from seatide.store import views
from seatide.store.db import open_store

JOB = """
env { job.mode = BATCH, secret.variables = [tenant] }
source { FakeSource { row.num = 3, schema = { fields { id = bigint } } } }
sink { Console { password = "pw-for-${tenant}" } }
"""
VARIABLES = {"tenant": "ACME-7731"}


@pytest.fixture
def parses(monkeypatch):
    """The number of times a job text is parsed from here on."""
    job_text._read.cache_clear()
    calls = []
    real = job_text.parse
    monkeypatch.setattr(job_text, "parse", lambda *a, **k: (calls.append(a[0]), real(*a, **k))[1])
    yield calls
    job_text._read.cache_clear()


def test_submit_read_and_drive_a_job_on_one_parse(parses, tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/state.db")
    intents.submit(store, str(tmp_path), text=JOB, variables=VARIABLES, job_id="once", actor="test")
    with store.read() as conn:
        info = views.job_info(conn, "once")
        job = conn.execute(views.s.jobs.select().where(views.s.jobs.c.job_id == "once")).first()
    env, dag = stored_outline(job.config, job.variables, None)       # as for a job recorded without one
    # what a worker and a driver read of the job: its stored variables (with the environment recorded with them)
    stored = json.loads(job.variables)
    secrets = secret_values(JOB, stored)
    load_job_env(JOB, stored)
    config = load_job_text(JOB, stored, source_name="job once")
    assert len(parses) == 1
    assert config.parsed.tree is load_job_text(JOB, stored).parsed.tree
    assert "pw-for-ACME-7731" in secrets and f'password = "{MASK}"' not in info["config"]   # a ${...} shows no value
    assert env["job.mode"] == "BATCH" and len(dag["vertexInfoMap"]) == 2


def test_another_text_or_other_variables_are_parsed_anew(parses):
    load_job_text(JOB, VARIABLES)
    load_job_text(JOB, {"tenant": "OTHER-1"})
    load_job_text(JOB + "\n# changed\n", VARIABLES)
    assert len(parses) == 3
