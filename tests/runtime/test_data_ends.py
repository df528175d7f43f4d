"""A driver ends, before Spark, only the pipelines an earlier attempt ran to the end of their data
(runtime/data_ends.py): each of its sources' ends recorded, no batch of its sinks decided and not
published; a BATCH job's only, and only while the job is to run. The story of a driver killed
there, whose next attempt starts no JVM, is tests/cluster/test_checkpoints.py's."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan
from seatide.plan.outline import outline_json
from seatide.runtime.data_ends import end_pipelines_whose_data_ended, ends_without_spark
from seatide.runtime.heartbeat import Heartbeat
from seatide.runtime.reporter import AttemptReporter
from seatide.store import schema as s
from seatide.store.db import open_store
from seatide.store.jobs import request_stop, submit_job
from seatide.testing.jobs import batch_job, streaming_job
from tests.contract.harness import new_attempt


@pytest.fixture
def store(store_url):
    st = open_store(store_url)
    yield st
    st.dispose()


def _driver(store, tmp_path, text: str) -> tuple[AttemptReporter, dict[int, str]]:
    """The job submitted and its first attempt's reporter; each pipeline's source."""
    config = load_job_text(text)
    plan = build_plan(config)
    submit_job(store, text=text, variables={}, config=config, plan=plan, outline=outline_json(config),
               data_dir=str(tmp_path), job_id="j1")
    sources = {p.pipeline_id: p.sources[0].plugin_id for p in plan.pipelines}
    return AttemptReporter(store, "j1", 1, new_attempt(store, "j1", 1)), sources


def _statuses(store) -> dict[int, str]:
    with store.read() as conn:
        return dict(conn.execute(select(s.pipelines.c.pipeline_id, s.pipelines.c.status)
                                 .where(s.pipelines.c.job_id == "j1")).all())


def _hint(store) -> bool:
    """The worker's: its driver will end the attempt without Spark."""
    return ends_without_spark(store, "j1", 1)


def test_only_pipelines_with_every_source_ended_and_nothing_left_to_publish_are_ended(store, tmp_path):
    reporter, sources = _driver(store, tmp_path, batch_job(str(tmp_path / "out"), pipelines=2))
    assert not end_pipelines_whose_data_ended(reporter, "j1", "RUN")     # no evidence: nothing ended
    assert set(_statuses(store).values()) == {"CREATED"} and not _hint(store)
    reporter.source_ended(1, sources[1])
    reporter.decide_batch(2, "sink[1]", 0, "T0", {"publish": {}, "state": {"rows": 1}})
    reporter.source_ended(2, sources[2])
    assert not end_pipelines_whose_data_ended(reporter, "j1", "CANCEL")   # a cancel is answered as before
    assert set(_statuses(store).values()) == {"CREATED"}
    # pipeline 2 has a batch decided and not published (to roll forward): it runs, 1 is ended; the
    # worker's hint says so too (the attempt needs Spark: its JVM starts early, as before)
    assert not _hint(store)
    assert not end_pipelines_whose_data_ended(reporter, "j1", "RUN")
    assert _statuses(store) == {1: "FINISHED", 2: "CREATED"}
    reporter.batch_published(2, "sink[1]", "T0")
    assert _hint(store)
    assert end_pipelines_whose_data_ended(reporter, "j1", "RUN")
    assert _statuses(store) == {1: "FINISHED", 2: "FINISHED"}


def test_a_stream_is_never_ended_from_recorded_ends(store, tmp_path):
    reporter, sources = _driver(store, tmp_path, streaming_job(str(tmp_path / "out")))
    reporter.source_ended(1, sources[1])
    assert not end_pipelines_whose_data_ended(reporter, "j1", "RUN")
    assert _statuses(store) == {1: "CREATED"}


def test_a_cancel_recorded_after_the_driver_read_its_desired_state_is_not_overtaken(store, tmp_path):
    """The driver read RUN (its heartbeat), then the cancel landed while it loaded the config and
    planned: the FINISHED writes see the cancel in their own transaction and write nothing, so the
    job ends CANCELED as the user asked, not FINISHED."""
    reporter, sources = _driver(store, tmp_path, batch_job(str(tmp_path / "out"), pipelines=2))
    reporter.mark_running(1)
    heartbeat = Heartbeat(reporter, 0.2, 30).start()
    try:
        desired = heartbeat.desired
        for pipeline_id, source in sources.items():
            reporter.source_ended(pipeline_id, source)
        request_stop(store, "j1")
        assert desired == "RUN"
        assert not end_pipelines_whose_data_ended(reporter, "j1", desired)
    finally:
        heartbeat.stop()
    assert _statuses(store) == {1: "CREATED", 2: "CREATED"}


def test_a_sinks_once_record_is_no_batch_left_to_publish(store, tmp_path):
    """A sink's once record (decide_once: batch -1, e.g. the multi-table Jdbc sink's home database)
    stays DECIDED by design, never published nor rolled forward: it keeps no pipeline from ending,
    and the hint and the driver agree."""
    reporter, sources = _driver(store, tmp_path, batch_job(str(tmp_path / "out")))
    reporter.decide_batch(1, "sink[0]", -1, "H_j1_1_0", {"home": "db1"})
    reporter.source_ended(1, sources[1])
    assert _hint(store)
    assert end_pipelines_whose_data_ended(reporter, "j1", "RUN")
    assert _statuses(store) == {1: "FINISHED"}


TWO_SOURCES = """
env { job.mode = BATCH }
source { FakeSource { plugin_output = "a", row.num = 3, schema = { fields { id = bigint } } }
         FakeSource { plugin_output = "b", row.num = 3, schema = { fields { id = bigint } } } }
sink { Console { plugin_input = ["a", "b"] } }
"""


def test_the_hint_is_given_only_for_an_attempt_the_driver_ends(store, tmp_path):
    """A pipeline with a source's end recorded that its driver would still run (its other source's
    end is not recorded; a batch is decided, of a lineage the store cannot tell abandoned) is no
    hint: its attempt keeps its early JVM."""
    reporter, _ = _driver(store, tmp_path, TWO_SOURCES)
    reporter.source_ended(1, "source[0]")
    assert not _hint(store) and not end_pipelines_whose_data_ended(reporter, "j1", "RUN")
    reporter.decide_batch(1, "sink[0]", 3, "T_j1_1_0_abandoned_3", {"publish": {}, "state": {"rows": 1}})
    reporter.source_ended(1, "source[1]")
    assert not _hint(store) and not end_pipelines_whose_data_ended(reporter, "j1", "RUN")
    assert _statuses(store) == {1: "CREATED"}
