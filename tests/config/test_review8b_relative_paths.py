"""Outside review 8b, F8: a LocalFile sink's relative or ``~`` path was resolved in the driver's
working directory. A cluster's driver runs on a worker, in the worker's directory, and the next
attempt (or a resume) may run on another worker: one job's output, and its target key, split across
directories. As Spark resolves a relative path where its driver runs:

* submitted to a cluster (``seatide submit``, the REST APIs), the job is refused, naming the sink,
  the path and the way on: an absolute path;
* run locally (``seatide run``, ``seatide resume`` of a local job: the driver runs where the client
  does), the path is made absolute against the client's directory when the job is recorded, so every
  attempt and resume writes, and keys, one directory;
* ``seatide check`` plans it and says both.
"""

from __future__ import annotations

import json
import os

import pytest
from sqlalchemy import select

from seatide import intents
from seatide.store import schema as s
from seatide.store.db import open_store
from tests.cli.test_check_and_version import _job as _job_file, seatide

JOB = """env {{ job.mode = "BATCH" }}
source {{ FakeSource {{ row.num = 3, schema = {{ fields {{ id = "bigint" }} }} }} }}
sink {{
  Console {{}}
  LocalFile {{
    path = {path}
    file_format_type = "json"
  }}
}}
"""


@pytest.fixture
def store(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/state.db")
    yield store
    store.dispose()


def _recorded(store, job_id: str):
    with store.read() as conn:
        return conn.execute(select(s.jobs).where(s.jobs.c.job_id == job_id)).first()


@pytest.mark.parametrize("path", ['"out/orders"', "out", '"~/orders"', '"./out"', '"file:out"'])
def test_a_cluster_submission_refuses_a_relative_sink_path_naming_sink_path_and_fix(store, tmp_path, path):
    with pytest.raises(intents.Refusal) as refused:
        intents.submit(store, str(tmp_path), text=JOB.format(path=path), actor="test")
    message = str(refused.value)
    assert refused.value.kind is intents.RefusalKind.BAD_REQUEST
    assert "sink[1] LocalFile" in message and path.strip('"') in message, message
    assert "absolute path" in message and "relative" in message, message


def test_a_cluster_resume_with_a_new_text_refuses_a_relative_sink_path(store, tmp_path):
    job_id = intents.submit(store, str(tmp_path), text=JOB.format(path=f'"{tmp_path}/out"'), actor="test").job_id
    with pytest.raises(intents.Refusal, match="absolute path"):
        intents.resume(store, job_id, text=JOB.format(path='"out"'), actor="test")


def test_a_local_run_records_the_path_made_absolute_against_the_clients_directory(store, tmp_path):
    client = str(tmp_path / "client")
    for path, placed in (('"out/orders"', f"{client}/out/orders"), ("out", f"{client}/out"),
                         ('"~/orders"', os.path.expanduser("~/orders")),
                         ('"file:./x/${table_name:t}"', f"{client}/x/${{table_name:t}}")):
        job_id = intents.submit(store, str(tmp_path), text=JOB.format(path=path), actor="test",
                                paths_from=client).job_id
        config = _recorded(store, job_id).config
        assert f"path = {json.dumps(placed)}" in config, config
        assert "file_format_type" in config and "Console {}" in config    # the rest as written


def test_an_absolute_path_is_recorded_as_written(store, tmp_path):
    text = JOB.format(path=f'"file://{tmp_path}/out"')
    job_id = intents.submit(store, str(tmp_path), text=text, actor="test").job_id
    assert _recorded(store, job_id).config == text


def test_a_relative_path_from_a_variable_is_refused_locally_too(store, tmp_path):
    with pytest.raises(intents.Refusal, match="absolute path") as refused:
        intents.submit(store, str(tmp_path), text=JOB.format(path="${out}"), variables={"out": "rel"},
                       actor="test", paths_from=str(tmp_path))
    assert "-i" in str(refused.value)


def test_check_plans_a_relative_path_and_says_what_run_and_submit_do(tmp_path):
    result = seatide("check", _job_file(tmp_path, JOB.format(path='"out"')))
    assert result.returncode == 0, result.stderr
    assert "sink[1] LocalFile" in result.stdout and "relative" in result.stdout, result.stdout
    assert "seatide submit refuses" in result.stdout, result.stdout


@pytest.mark.cluster
def test_seatide_run_writes_a_relative_path_under_its_directory_and_records_it_absolute(tmp_path):
    """As a user runs it: ``seatide run`` started in ``client`` with ``path = "out"``; the files land
    in ``client/out`` and the recorded job names that directory, so a resume from anywhere writes it."""
    import subprocess
    import sys

    from seatide.store.address import default_store_url

    client = tmp_path / "client"
    client.mkdir()
    (client / "job.conf").write_text(JOB.format(path='"out"'))
    data_dir = tmp_path / "d"
    result = subprocess.run([sys.executable, "-m", "seatide.cli.main", "run", "job.conf", "--data-dir", str(data_dir),
                             "--job-id", "rel"], capture_output=True, text=True, timeout=300, cwd=client)
    assert result.returncode == 0, result.stderr[-3000:]
    assert [p.name for p in (client / "out").iterdir() if p.suffix == ".json"], list((client / "out").iterdir())
    store = open_store(default_store_url(str(data_dir)))
    try:
        assert f"path = {json.dumps(str(client / 'out'))}" in _recorded(store, "rel").config
    finally:
        store.dispose()
