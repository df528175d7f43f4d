"""Copied from /work/review/test_review_refused_at_open_message.py (finding 5).

Outside review of 8348a57 (driver._refused_at_open): the message every opened pipeline fails with.

It says "a sink of this pipeline would remove data when it prepares its target" to every opened pipeline,
also to one whose sinks only append (the pipeline that destroys is another); and for a refusal that is
transient (retried by the job on its own) it tells the user to "Fix pipeline N, then run the job again"."""

from __future__ import annotations

from types import SimpleNamespace

from seatide.runtime.pipeline_start import check_sinks_ahead
from seatide.runtime.pipeline_run import Outcome, PipelineRun
from seatide.store.states import PipelineStatus


class _Sinks:
    def __init__(self, destroys: bool):
        self.destroys = destroys

    def destroys_ahead(self) -> bool:
        return self.destroys

    def check_ahead(self, frames, others_destroy) -> None:
        pass


def _run(pipeline_id: int, sinks, outcome=None):
    run = PipelineRun.__new__(PipelineRun)
    run.pipeline = SimpleNamespace(pipeline_id=pipeline_id)
    run.sinks = sinks
    run.routed = None
    run.sink_frames = []
    run.query = None            # not started
    run.outcome = outcome or Outcome(PipelineStatus.RUNNING)
    return run


def test_an_appending_pipeline_is_not_told_its_sink_would_remove_data():
    destroying, appending = _run(1, _Sinks(True)), _run(2, _Sinks(False))
    refused = _run(3, None, Outcome(PipelineStatus.FAILED, error="claimed by another job", permanent=True))
    check_sinks_ahead([destroying, appending, refused])
    assert appending.outcome.status == PipelineStatus.FAILED
    assert "a sink of this pipeline would remove data" not in appending.outcome.error, appending.outcome.error
    assert "a sink of pipeline 1 would remove data" in appending.outcome.error, appending.outcome.error
    assert "a sink of this pipeline would remove data" in destroying.outcome.error, destroying.outcome.error
    assert "Fix pipeline 3, then run the job again" in appending.outcome.error, appending.outcome.error


def test_a_transient_refusal_does_not_ask_the_user_to_fix_and_rerun():
    destroying = _run(1, _Sinks(True))
    refused = _run(2, None, Outcome(PipelineStatus.FAILED, error="OSError: connection reset", permanent=False))
    check_sinks_ahead([destroying, refused])
    assert not destroying.outcome.permanent
    assert "run the job again" not in destroying.outcome.error, destroying.outcome.error
    assert "retries" in destroying.outcome.error, destroying.outcome.error
