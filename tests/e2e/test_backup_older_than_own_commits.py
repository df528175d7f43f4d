"""A checkpoint directory put back older than what a sink that commits in its own system committed
(outside review 3: ``decided_in_store`` False: Jdbc, Redis, Http).

Such a sink's batches leave no decision in the store (``sink_manifests``): its record of a batch is
in its target (Jdbc: ``seatide_sink_commits``, in the batch's own transaction). Batch 0 committed
there, the driver died before the store's checkpoint row; the directory put back as it was before
Spark planned batch 0, resumed with ``micro-batch.max-rows`` halved. Accepted before: batch 0
planned again as ids 0-149 was skipped (its transaction id is recorded in PostgreSQL), batch 1
wrote ids 150-299 a second time. The driver's record of each batch's start
(``store/batch_starts.py``) makes it refused like a LocalFile sink's decided batch.

A real job in the shared SparkSession on a real SQLite store, into real PostgreSQL (127.0.0.1:5432,
db ``test``), a table without a primary key: nothing in the target folds a batch written twice.
"""

from __future__ import annotations

import os
import secrets

import pytest

from seatide import intents
from tests.connectors.jdbc_sink_helpers import execute, query
from tests.e2e.test_backup_older_than_sinks import _assert_refused_as_older, _die_after_a_sink_commit
from tests.e2e.test_backup_put_back import _put_back, local_run_pipelines
from tests.e2e.test_jobs import fake_to_parquet

pytestmark = pytest.mark.spark

PG = ("jdbc:postgresql://127.0.0.1:5432/test", "postgres")


@pytest.fixture
def table():
    name = f"t_{secrets.token_hex(4)}"
    execute(PG, f"CREATE TABLE {name} (id BIGINT, name VARCHAR(64), value DOUBLE PRECISION)")   # no key
    yield name
    execute(PG, f"DROP TABLE IF EXISTS {name}")


def _jdbc_job(table: str, max_rows: int) -> str:
    parquet = fake_to_parquet("unused", rows=600, split_num=6, extra_env="checkpoint.interval = 1000\n"
                              f"micro-batch.max-rows = {max_rows}\njob.retry.times = 0")
    sink = (f'Jdbc {{ plugin_input = "out", url = "{PG[0]}", driver = "org.postgresql.Driver", '
            f'user = "{PG[1]}", password = "", table = "{table}", data_save_mode = "APPEND_DATA" }}')
    head, _, _ = parquet.rpartition("sink {")
    return head + "sink {\n  " + sink + "\n}\n"


def _ids(table: str) -> tuple[int, int]:
    return query(PG, f"SELECT count(*), count(DISTINCT id) FROM {table}")[0]


def test_a_resume_refuses_a_backup_older_than_a_jdbc_sinks_own_commit(local, tmp_path, monkeypatch, table):
    _die_after_a_sink_commit(monkeypatch, tmp_path)
    failed = local.run(_jdbc_job(table, 300))
    assert failed.status == "FAILED" and failed.checkpoints() == [], failed.error
    assert _ids(table) == (300, 300)
    (pipeline,) = failed.pipelines()
    _put_back(pipeline.checkpoint_dir, "prepared, no batch planned")
    try:
        intents.resume(local.store, failed.job_id, text=_jdbc_job(table, 150), actor="test")
    except intents.Refusal as refused:
        _assert_refused_as_older(str(refused), failed.job_id, why="offsets/0 is missing")
    else:
        resumed = local.drive(failed.job_id)
        pytest.fail(f"the backup was accepted: the job {resumed.status}, PostgreSQL holds (rows, distinct ids) "
                    f"= {_ids(table)} for 600 rows")
    assert _ids(table) == (300, 300)


def test_a_retry_refuses_a_backup_older_than_a_jdbc_sinks_own_commit(local, tmp_path, monkeypatch, table):
    """The same put back before the same incarnation's retry: its driver refuses the directory at the
    pipeline's start (runtime/lost_directory.py), and the job fails with the message, nothing written."""
    crashed = _die_after_a_sink_commit(monkeypatch, tmp_path)
    attempts = []

    def backup_put_back(attempt):
        attempts.append(attempt)
        if len(attempts) == 2:
            assert os.path.exists(crashed) and _ids(table) == (300, 300)
            (pipeline,) = local_run_pipelines(local, attempt.job_id)
            _put_back(pipeline.checkpoint_dir, "prepared, no batch planned")

    run = local.run(_jdbc_job(table, 300).replace("job.retry.times = 0", "job.retry.times = 1"),
                    before_attempt=backup_put_back)
    assert len(attempts) == 2 and run.status == "FAILED", (run.status, run.error)
    _assert_refused_as_older(run.error, run.job_id, why="offsets/0 is missing")
    assert _ids(table) == (300, 300)


def test_only_a_sink_that_keeps_rows_in_its_own_system_records_its_batches_starts(local, tmp_path, table):
    """Console and Assert keep nothing a replay could write twice: their batches cost no store write
    (outside review of the start record: every batch paid one), while a Jdbc sink's do."""
    console = fake_to_parquet("unused", rows=600, split_num=6, extra_env="checkpoint.interval = 1000\n"
                              "micro-batch.max-rows = 300").rpartition("sink {")[0] + \
        'sink {\n  Console { plugin_input = "out" }\n}\n'
    printed = local.run(console)
    jdbc = local.run(_jdbc_job(table, 300))
    assert printed.status == jdbc.status == "FINISHED", (printed.error, jdbc.error)
    assert [p.started_batch for p in local_run_pipelines(local, printed.job_id)] == [None]
    assert [p.started_batch for p in local_run_pipelines(local, jdbc.job_id)] == [1]
