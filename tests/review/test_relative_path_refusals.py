"""Review of 0d66b70 (F8): ``seatide run`` makes a relative sink path absolute by rewriting its span
in the job text (config/local_paths.placed_text). A JSON job (SeaTunnel's .json config) has no such
span: its relative path is refused, and the message says it came "from a -i variable" (no variable
was given) and tells the user to pass -i. A valid config is refused locally (promise 2) with a
wrong message (promise 3)."""

from __future__ import annotations

import pytest

from seatide import intents
from seatide.store.db import open_store

JSON_JOB = ('{"env": {"job.mode": "BATCH"}, "source": [{"plugin_name": "FakeSource", "row.num": 3, '
            '"schema": {"fields": {"id": "bigint"}}}], '
            '"sink": [{"plugin_name": "LocalFile", "path": "out", "file_format_type": "json"}]}')


@pytest.fixture
def store(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/state.db")
    yield store
    store.dispose()


def test_seatide_run_of_a_json_job_with_a_relative_path_records_it_absolute(store, tmp_path):
    try:
        intents.submit(store, str(tmp_path), text=JSON_JOB, source="job.json", actor="t", paths_from=str(tmp_path))
    except intents.Refusal as refused:
        assert "-i variable" not in str(refused), str(refused)
        raise
