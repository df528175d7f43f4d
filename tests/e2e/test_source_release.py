"""What a source holds outside Spark for a job (a replication slot) is released when the job's
checkpoints go for good, once, and a failed release is retried for that job alone."""

from __future__ import annotations

import time

import pytest

from seatide.connectors.fake.source import FakeSource
from seatide.plugin.registry import register
from seatide.store.runs import run_key
from tests.e2e.harness import InProcessCluster

pytestmark = pytest.mark.spark

RELEASES: list[str] = []
FAILURES_LEFT = {"n": 0}


@register
class ReleaseRecordingSource(FakeSource):
    """FakeSource whose release is recorded, and fails while FAILURES_LEFT says so."""

    plugin_name = "ReleaseRecordingSource"

    def release(self, job_id: str, keep: frozenset[str] = frozenset(), within_s: float = 10.0) -> None:
        if FAILURES_LEFT["n"] > 0:
            FAILURES_LEFT["n"] -= 1
            raise ConnectionError("source server unreachable")
        RELEASES.append(job_id)


def _job(max_row: int) -> str:
    return f"""
env {{ job.mode = BATCH, state-cleanup-delay = 0 }}
source {{ ReleaseRecordingSource {{ row.num = 20, sequence.field = "id", schema = {{ fields {{ id = bigint }} }} }} }}
sink {{ Assert {{ rules {{ row_rules = [{{ rule_type = MAX_ROW, rule_value = {max_row} }}] }} }} }}
"""


def _tick_until(local: InProcessCluster, job_id: str, kind: str, timeout: float = 60.0) -> list[str]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        local._tick()
        kinds = [e.kind for e in local.events(job_id)]
        if kind in kinds:
            return kinds
        time.sleep(0.1)
    raise AssertionError(f"no {kind} event for {job_id} within {timeout:.0f} s")


@pytest.fixture
def local(spark, tmp_path):
    RELEASES.clear()
    FAILURES_LEFT["n"] = 0
    return InProcessCluster(spark, str(tmp_path / "data"))


def test_a_finished_jobs_sources_are_released_at_its_cleanup(local):
    FAILURES_LEFT["n"] = 1
    run = local.run(_job(max_row=100), job_id="done")
    assert run.status == "FINISHED", run.error
    kinds = _tick_until(local, "done", "CLEANUP_DONE")
    assert "CLEANUP_RETRY" in kinds, "the first release failed and was retried"
    assert RELEASES == [run_key("done", run.job().run_id)]    # the run's names, never a later run's


def test_a_failed_jobs_sources_are_released_at_history_expiry_with_retries(local):
    local.coordinator.applier.history_expire_s = 0.5
    FAILURES_LEFT["n"] = 1
    run = local.run(_job(max_row=5), job_id="failed")
    assert run.status == "FAILED"
    run_id = run.job().run_id           # its rows go with its history
    _tick_until(local, "failed", "CLEANUP_DONE")
    assert RELEASES == [], "a failed job can still be resumed: nothing is released at cleanup"
    kinds = _tick_until(local, "failed", "HISTORY_EXPIRED")
    assert kinds.count("CLEANUP_RETRY") == 1 and RELEASES == [run_key("failed", run_id)]
