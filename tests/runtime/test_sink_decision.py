"""The sink commit decision (issue 9 item 1): one attempt-fenced store write per batch.

Real store (SQLite and PostgreSQL), real Spark and LocalFile writer; the zombie driver is a
thread held at a failpoint while the test replaces its attempt in the store, as the leader
does when it declares an attempt lost.
"""

from __future__ import annotations

import os
import threading
import time

import pytest
from sqlalchemy import insert, select, update

from seatide import failpoints
from seatide.config.loader import load_job_text
from seatide.connectors.file.paths import STAGING_DIR
from seatide.connectors.file.sink import LocalFileSink
from seatide.plan.dag import build_plan
from seatide.plugin.options import read_options
from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.plugin.sink_protocol import SaveModeDoor
from seatide.runtime.commit_log import SinkCommitLog, StoreDecisions
from seatide.runtime.sink_runs import TARGET_RECORDS, sink_run
from seatide.runtime.reporter import AttemptReporter
from seatide.store import schema as s
from seatide.store.db import AttemptFenced, open_store
from seatide.store.jobs import forget_job, submit_job

JOB = """
source { FakeSource { row.num = 3, schema = { fields { id = bigint } } } }
sink { LocalFile { path = "/tmp/unused", file_format_type = "csv" } }
"""
SINK = "sink[0]"


@pytest.fixture
def store(store_url):
    st = open_store(store_url)
    yield st
    st.dispose()


def submit(store, tmp_path, job_id="j1") -> None:
    config = load_job_text(JOB)
    submit_job(store, text=JOB, variables={}, config=config, plan=build_plan(config),
               data_dir=str(tmp_path), job_id=job_id)


def new_attempt(store, job_id: str, number: int) -> int:
    """What the leader does: the current attempt (if any) is LOST, a new one is current."""
    with store.write() as conn:
        conn.execute(update(s.attempts).where(s.attempts.c.job_id == job_id).values(state="LOST"))
        attempt_id = conn.execute(insert(s.attempts).values(
            job_id=job_id, incarnation=1, number=number, worker_id="w", state="RUNNING",
            created_at=time.time(), kill_requested=False)).inserted_primary_key[0]
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == job_id).values(current_attempt=attempt_id))
    return attempt_id


def manifests(store) -> list:
    with store.read() as conn:
        return conn.execute(select(s.sink_manifests).where(s.sink_manifests.c.batch_id >= 0)   # batches' only
                            .order_by(s.sink_manifests.c.batch_id)).all()


def attempt_run(sink, log, reporter, attempt_id=None):
    """The sink opened as an attempt's pipeline opens it: decisions and save modes in the store."""
    return sink_run(sink, None, log, decisions=StoreDecisions(reporter, 1, SINK, "T"),
                    door=SaveModeDoor(StoreDecisions(reporter, 1, TARGET_RECORDS, "P"), "P_j1_1_origin"),
                    transaction_prefix="T", staging_tag=str(attempt_id or reporter.attempt_id))


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_only_the_current_attempt_decides_and_the_first_decision_stands(store, tmp_path):
    submit(store, tmp_path)
    first = AttemptReporter(store, "j1", 1, new_attempt(store, "j1", 1))
    decided = first.decide_batch(1, SINK, 0, "T0", {"publish": {"moves": []}, "state": {"rows": 1}})
    assert decided["state"] == {"rows": 1}
    # a retry of the same decision (the driver's write was in doubt) keeps the first one
    assert first.decide_batch(1, SINK, 0, "T0", {"publish": {}, "state": {"rows": 9}})["state"] == {"rows": 1}
    second = AttemptReporter(store, "j1", 1, new_attempt(store, "j1", 2))
    with pytest.raises(AttemptFenced):
        first.decide_batch(1, SINK, 1, "T1", {"publish": {}, "state": {"rows": 2}})
    assert [(m.batch_id, m.status) for m in manifests(store)] == [(0, "DECIDED")]
    # the replacement finds the decided batch to roll forward, and marks it published
    assert [b for b, _, _ in second.unpublished_manifests(1, SINK, "T")] == [0]
    second.batch_published(1, SINK, "T0")
    assert [(m.batch_id, m.status) for m in manifests(store)] == [(0, "PUBLISHED")]
    with store.write() as conn:
        forget_job(conn, "j1", 1)
    assert manifests(store) == []


def _frame(spark):
    from pyspark.sql import functions as F

    return spark.createDataFrame([(1,), (2,), (3,)], "id bigint").withColumn(ROW_KIND_COLUMN, F.lit(0).cast("tinyint"))


def _published_ids(out: str) -> list[int]:
    ids = []
    for directory, dirs, files in os.walk(out):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if not name.startswith((".", "_")):
                with open(os.path.join(directory, name)) as handle:
                    ids += [int(line) for line in handle if line.strip()]
    return sorted(ids)


def test_a_zombie_driver_held_before_its_decision_publishes_nothing(spark, store, tmp_path, monkeypatch):
    submit(store, tmp_path)
    out, gate = str(tmp_path / "out"), tmp_path / "gate"
    sink = LocalFileSink(read_options({"path": out, "file_format_type": "csv"}, LocalFileSink.options))
    log = SinkCommitLog(str(tmp_path / "checkpoint" / "sinks" / SINK))
    monkeypatch.setitem(failpoints._POINTS, "sink.before_decision", f"gate:0:{gate}")
    monkeypatch.setitem(failpoints._HITS, "sink.before_decision", 0)

    zombie_id = new_attempt(store, "j1", 1)
    zombie = AttemptReporter(store, "j1", 1, zombie_id)
    outcome: dict = {}

    def zombie_batch():
        try:
            attempt_run(sink, log, zombie).write(_frame(spark), 0)
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=zombie_batch)
    thread.start()
    try:
        wait_until(lambda: failpoints._HITS["sink.before_decision"] == 1, 120, "the zombie's batch staged")
        # The leader declares the attempt lost and starts another; the zombie has not noticed.
        replacement_id = new_attempt(store, "j1", 2)
        monkeypatch.delitem(failpoints._POINTS, "sink.before_decision")
        replacement = AttemptReporter(store, "j1", 1, replacement_id)
        result = attempt_run(sink, log, replacement).write(_frame(spark), 0)
        assert not result.replayed and result.state["rows"] == 3
    finally:
        gate.touch()
        thread.join(120)
    assert isinstance(outcome.get("error"), AttemptFenced), outcome
    assert _published_ids(out) == [1, 2, 3]                        # every row once
    assert [(m.attempt_id, m.status) for m in manifests(store)] == [(replacement_id, "PUBLISHED")]
    # the replacement's staging discarded the zombie's (undecided) and was removed after its publish
    assert not os.path.exists(os.path.join(out, STAGING_DIR))


def test_a_decided_batch_whose_driver_died_is_published_at_the_next_start(spark, store, tmp_path, monkeypatch):
    submit(store, tmp_path)
    out = str(tmp_path / "out")
    sink = LocalFileSink(read_options({"path": out, "file_format_type": "csv"}, LocalFileSink.options))
    log = SinkCommitLog(str(tmp_path / "checkpoint" / "sinks" / SINK))
    monkeypatch.setitem(failpoints._POINTS, "sink.after_decision", "raise")   # dies between decision and publish
    first = AttemptReporter(store, "j1", 1, new_attempt(store, "j1", 1))
    with pytest.raises(failpoints.FailpointError):
        attempt_run(sink, log, first).write(_frame(spark), 0)
    assert _published_ids(out) == [] and log.committed(0) is None
    monkeypatch.delitem(failpoints._POINTS, "sink.after_decision")
    second = AttemptReporter(store, "j1", 1, new_attempt(store, "j1", 2))
    assert attempt_run(sink, log, second).roll_forward() == [0]
    assert _published_ids(out) == [1, 2, 3] and log.committed(0)["rows"] == 3
    assert not os.path.exists(os.path.join(out, STAGING_DIR))
    # the replay of the batch that follows writes nothing more
    again = attempt_run(sink, log, second).write(_frame(spark), 0)
    assert again.replayed and _published_ids(out) == [1, 2, 3]
    assert [m.status for m in manifests(store)] == ["PUBLISHED"]
