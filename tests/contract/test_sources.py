"""The source contract suite: the cases every source passes, run against each source's small
context (``source_systems.py``). A new source is not done until it passes them.

Every case runs a real job (a checkpointed BATCH job: the source read split by split in bounded
micro-batches) through the real coordinator, worker and driver code in the test process
(tests/e2e/harness.py), into a LocalFile sink (parquet) whose files say which rows arrived. A job
is interrupted at a chosen batch by the driver's failpoint gate (``driver.batch_start``), never
by a sleep. Each case's docstring says its purpose, how it works, what passing means.
"""

from __future__ import annotations

import json
import os
import time

import pyarrow.parquet as pq
import pytest
from sqlalchemy import select

from seatide import failpoints, intents
from seatide.store import schema as s
from seatide.store.jobs import request_stop
from tests.contract.source_systems import (REPLAYED, STOPPED, FakeSystem, HttpSystem, IcebergSystem, JdbcSystem,
                                           LocalFileSystem, PaimonSystem, RedisSystem, SourceSystem)
from tests.e2e.harness import InProcessCluster

pytestmark = pytest.mark.spark

SOURCES = ["Fake", "LocalFile", "PostgreSQL", "MariaDB", "Http", "Paimon", "Iceberg", "Redis"]


@pytest.fixture(params=SOURCES)
def system(request, tmp_path):
    name = request.param
    if name == "Fake":
        made: SourceSystem = FakeSystem()
    elif name == "LocalFile":
        made = LocalFileSystem(str(tmp_path))
    elif name == "Iceberg":
        made = IcebergSystem(str(tmp_path))
    elif name == "Paimon":
        made = PaimonSystem(str(tmp_path))
    elif name == "Http":
        made = HttpSystem(request.getfixturevalue("http_server"))
    elif name == "Redis":
        made = RedisSystem(request.getfixturevalue("redis_server"))
    else:
        made = JdbcSystem(name)
    yield made
    made.close()


@pytest.fixture
def local(spark, tmp_path):
    return InProcessCluster(spark, str(tmp_path / "data"))


def job(system: SourceSystem, out: str) -> str:
    return f"""
env {{ job.mode = BATCH, parallelism = 2, checkpoint.interval = 1000, micro-batch.max-rows = {system.max_rows},
       job.retry.interval.seconds = 0 }}
source {{ {system.block()} }}
sink {{ LocalFile {{ path = "{out}", file_format_type = parquet }} }}
"""


def delivered(out: str) -> list[int]:
    """The ids the sink's readers see, sorted, duplicates kept."""
    ids: list[int] = []
    for directory, dirs, files in os.walk(out):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        ids += [i for f in files if f.endswith(".parquet")
                for i in pq.read_table(os.path.join(directory, f), columns=["id"]).column("id").to_pylist()]
    return sorted(ids)


def checkpoints(store, job_id: str) -> list:
    with store.read() as conn:
        return list(conn.execute(select(s.checkpoints).where((s.checkpoints.c.job_id == job_id)
                                                             & (s.checkpoints.c.status == "COMPLETED"))
                                 .order_by(s.checkpoints.c.checkpoint_id)))


def held_at(batch: int):
    """Wait until the driver is held at the start of ``batch`` (the gate let the batches before pass)."""
    deadline = time.monotonic() + 120
    while failpoints._HITS.get("driver.batch_start", 0) <= batch:
        assert time.monotonic() < deadline, f"the job never reached batch {batch}"
        time.sleep(0.05)


@pytest.fixture
def gate(monkeypatch, tmp_path):
    """Hold every batch from ``system.interrupt_at`` on at its start, until the gate file exists."""
    monkeypatch.setattr(failpoints, "_HITS", {})
    path = str(tmp_path / "gate")

    def arm(batch: int) -> str:
        monkeypatch.setitem(failpoints._POINTS, "driver.batch_start", f"gate:{batch}:{path}")
        return path
    return arm


def assert_each_batch_once(store, job_id: str, expected: list[int]) -> list:
    """Every batch recorded once, numbered from 0 without a gap, their rows adding up to the rows delivered."""
    done = checkpoints(store, job_id)
    assert sorted(c.batch_id for c in done) == list(range(len(done))), [c.batch_id for c in done]
    assert sum(c.rows for c in done) == len(expected)
    return done


def test_the_planned_splits_cover_every_row_once(system, local, tmp_path):
    """Purpose: the source's splits, batch by batch, are the whole data, none twice.

    How: a checkpointed BATCH job whose micro-batch.max-rows gives several batches.
    Passing: the sink holds every row exactly once; the job took several batches (the data is cut
    into splits), each recorded once with its own offsets, within the row bound where the source
    bounds batches by rows, their rows adding up to the data.
    """
    out = str(tmp_path / "out")
    run = local.run(job(system, out))
    assert run.status == "FINISHED", run.error
    assert delivered(out) == sorted(system.rows)
    done = assert_each_batch_once(local.store, run.job_id, system.rows)
    assert len(done) >= system.min_batches
    offsets = [json.dumps(json.loads(c.source_offsets)["sources"], sort_keys=True) for c in done]
    assert len(set(offsets)) == len(offsets), "two batches ended at the same offsets"
    if system.rows_bounded:
        assert max(c.rows for c in done) <= system.max_rows


def test_a_replayed_batch_reads_no_split_twice(system, local, gate, monkeypatch, tmp_path):
    """Purpose: an attempt that dies after its sinks decided a batch, before Spark recorded it, is
    replaced by one that replays that batch from its logged offsets and then reads only the splits
    after it, even when the data changed in between.

    How: batches before K pass; at K the sink's commit is followed by a raised failpoint
    (``driver.after_sink_commit``), failing the attempt; the data changes; the job's next attempt
    resumes from the same checkpoint.
    Passing: the job finishes in two attempts; the sink holds the context's expected rows, each
    once; the second attempt's first batch is K (it resumed, did not start over); every batch is
    recorded once.
    """
    out = str(tmp_path / "out")
    release = gate(system.interrupt_at)
    crashed = str(tmp_path / "crashed")

    def crash_after_deciding_k(store, job_id):
        if os.path.exists(release):
            return                                  # the second attempt: not interrupted
        held_at(system.interrupt_at)
        monkeypatch.setitem(failpoints._POINTS, "driver.after_sink_commit", f"once:raise:{crashed}")
        open(release, "w").close()

    attempts = []
    run = local.run(job(system, out), stop_after=crash_after_deciding_k,
                    before_attempt=lambda attempt: (attempts.append(attempt.attempt_id),
                                                    len(attempts) == 2 and system.change()))
    assert run.status == "FINISHED", run.error
    assert os.path.exists(crashed) and len(attempts) == 2, "the first attempt did not die after its decision"
    expected = system.expected_after_change(REPLAYED)
    assert delivered(out) == expected
    done = assert_each_batch_once(local.store, run.job_id, expected)
    assert min(c.batch_id for c in done if c.attempt_id == attempts[1]) == system.interrupt_at


def test_a_stopped_job_resumes_after_its_last_batch(system, local, gate, tmp_path):
    """Purpose: a job stopped between batches and resumed (a new incarnation, from its checkpoint)
    reads from the source's recorded offset on: every split not yet read, and none read before.

    How: batches before K commit; the job is held at K's start and cancelled (its batch K is not
    recorded); the data changes; the job is resumed and runs to its end.
    Passing: the stopped job delivered exactly the rows of its recorded batches; the resumed one
    starts at batch K and the sink ends with the context's expected rows, each once.
    """
    out = str(tmp_path / "out")
    release = gate(system.interrupt_at)

    def stop_at_k(store, job_id):
        held_at(system.interrupt_at)
        request_stop(store, job_id, savepoint=False, actor="test")

    stopped = local.run(job(system, out), stop_after=stop_at_k)
    assert stopped.status == "CANCELED", stopped.error
    before = checkpoints(local.store, stopped.job_id)
    assert [c.batch_id for c in before] == list(range(system.interrupt_at))
    assert len(delivered(out)) == sum(c.rows for c in before)
    open(release, "w").close()
    system.change()
    intents.resume(local.store, stopped.job_id, actor="test")
    resumed = local.drive(stopped.job_id)
    assert resumed.status == "FINISHED", resumed.error
    expected = system.expected_after_change(STOPPED)
    assert delivered(out) == expected
    after = [c for c in checkpoints(local.store, stopped.job_id) if c not in before]
    assert after and min(c.batch_id for c in after) == system.interrupt_at
    assert sum(c.rows for c in before + after) == len(expected)
