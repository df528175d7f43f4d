"""Schemathesis against the OpenAPI spec of an in-process app: no input gets a 5xx.

Every operation of /api/v1, a fixed seed and a bounded number of generated requests each,
so the run is repeatable and short; the app runs on a temporary SQLite store holding one
real job, so reads of existing ids are exercised too.
"""

from __future__ import annotations

import os
import tempfile

import hypothesis
import schemathesis

from seatide.api.rest import create_app
from seatide.store.address import default_store_url
from seatide.store.db import open_store

JOB = """
env { job.mode = BATCH }
source { FakeSource { row.num = 3, schema = { fields { id = bigint } } } }
sink { Console {} }
"""

_DATA_DIR = tempfile.mkdtemp(prefix="seatide-fuzz-")
_STORE = open_store(default_store_url(_DATA_DIR))
APP = create_app(_STORE, _DATA_DIR, "fuzz-node")
schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", APP)


def setup_module():
    from seatide import intents
    intents.submit(_STORE, _DATA_DIR, text=JOB, job_id="fuzz-job", actor="test")


def teardown_module():
    _STORE.dispose()


@schema.parametrize()
@hypothesis.settings(max_examples=60, deadline=None, derandomize=True, database=None,
                     suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.seed(11)
def test_no_operation_answers_5xx(case):
    response = case.call()
    assert response.status_code < 500, f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:500]}"
    assert os.path.isdir(_DATA_DIR)
