"""Outside review of 69dbcb9, F5: a JSON job file (SeaTunnel's .json form) with a relative literal sink path is placed only
when the raw text is strict JSON (local_paths._json_document: json.loads of the text as written). SeaTide fills
-i variables into the text before parsing (config/job_text._substitute), so `"row.num": ${ROWS}` is a valid job;
its raw text is no JSON, and `seatide run` refuses the literal path "out", saying it was "made with a -i variable
or a substitution" (it was not) and telling the user to give the variable an absolute value."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from seatide import intents
from seatide.store import schema as s
from tests.config.test_relative_json_paths import store  # noqa: F401  (a fixture)

JSON_JOB = ('{"env": {"job.mode": "BATCH"}, "source": [{"plugin_name": "FakeSource", "row.num": ${ROWS}, '
            '"schema": {"fields": {"id": "bigint"}}}], '
            '"sink": [{"plugin_name": "LocalFile", "path": "out", "file_format_type": "json"}]}')


def test_a_json_job_using_a_variable_elsewhere_has_its_literal_relative_path_placed(store, tmp_path):
    try:
        accepted = intents.submit(store, str(tmp_path), text=JSON_JOB, variables={"ROWS": "3"}, source="job.json",
                                  actor="t", paths_from=str(tmp_path))
    except intents.Refusal as refused:
        pytest.fail(f"a literal relative path refused as a variable's: {refused}")
    with store.read() as conn:
        recorded = conn.execute(select(s.jobs.c.config).where(s.jobs.c.job_id == accepted.job_id)).scalar()
    assert str(tmp_path / "out") in recorded, recorded
    assert '"row.num": ${ROWS}' in recorded, f"the variable is kept as written: {recorded}"


def test_a_json_job_path_made_with_a_variable_is_still_refused_as_one(store, tmp_path):
    text = JSON_JOB.replace('"path": "out"', '"path": "${DIR}/out"')
    with pytest.raises(intents.Refusal) as refused:
        intents.submit(store, str(tmp_path), text=text, variables={"ROWS": "3", "DIR": "data"}, source="job.json",
                       actor="t", paths_from=str(tmp_path))
    assert "made with a -i variable" in str(refused.value), refused.value
