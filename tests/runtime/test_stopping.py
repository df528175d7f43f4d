"""A driver stops all its pipelines at once: each stop waits for its running micro-batch to
commit, so stopping them one after another would take their sum and outlast the cancel grace."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from seatide.runtime.driver import stop_in_parallel


class HeldPipeline:
    """Stands in for a PipelineRun whose running micro-batch ends only when every pipeline
    of the job has been asked to stop: stopped one by one, the first would wait forever."""

    def __init__(self, pipeline_id: int, everyone: threading.Barrier):
        self.pipeline = SimpleNamespace(pipeline_id=pipeline_id)
        self.stop_requested = None
        self.everyone = everyone
        self.stopped = False

    def request_stop(self, mode: str) -> None:
        self.stop_requested = mode
        self.everyone.wait()
        self.stopped = True


@pytest.mark.parametrize("pipelines", [1, 4, 16])
def test_every_pipeline_is_asked_to_stop_before_any_stop_returns(pipelines):
    everyone = threading.Barrier(pipelines, timeout=20)
    runs = [HeldPipeline(n, everyone) for n in range(1, pipelines + 1)]
    stop_in_parallel(runs, "CANCEL")
    assert all(run.stopped for run in runs), "a pipeline's stop waited for another's"
    assert {run.stop_requested for run in runs} == {"CANCEL"}


def test_a_pipeline_already_stopping_is_not_asked_again():
    everyone = threading.Barrier(1, timeout=5)
    asked, fresh = HeldPipeline(1, everyone), HeldPipeline(2, everyone)
    asked.stop_requested = "SAVEPOINT"
    stop_in_parallel([asked, fresh], "CANCEL")
    assert (asked.stop_requested, asked.stopped) == ("SAVEPOINT", False)
    assert (fresh.stop_requested, fresh.stopped) == ("CANCEL", True)
