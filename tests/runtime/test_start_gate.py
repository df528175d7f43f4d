"""The attempt's start gate (runtime/start_gate.py) and the start's settling (pipeline_start._settle), without
Spark: every wait ends on a stop, and a refusal reaches the batch held there (outside review F3; the e2e proofs with
a real server are in tests/connectors/test_postgres_cdc_start_order.py)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from seatide.plugin.base import PermanentError
from seatide.runtime import pipeline_start
from seatide.runtime.start_gate import StartGate, StartRefused, StopAtBatchBoundary
from seatide.store.states import PipelineStatus


class _Opening:
    """A query without first offsets (its source waits on a lock)."""
    isActive = True
    recentProgress: list = []
    status = {"message": "Getting offsets from PythonMicroBatchStream"}


def _run(pipeline_id: int, status=PipelineStatus.RUNNING, error=None, permanent=False):
    outcome = SimpleNamespace(status=status, error=error, permanent=permanent)
    return SimpleNamespace(pipeline=SimpleNamespace(pipeline_id=pipeline_id, sources=[SimpleNamespace(name="Src")]),
                           query=_Opening(), outcome=outcome, stop_requested=None, poll=lambda: outcome,
                           refuse=lambda error, permanent: None)


def _in_thread(call) -> threading.Thread:
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("desired", ["SAVEPOINT", "CANCEL"])
def test_the_start_stops_settling_on_any_stop_and_leaves_the_gate_shut(desired):
    heartbeat, gate = SimpleNamespace(desired="RUN"), StartGate()
    settling = _in_thread(lambda: pipeline_start._settle(gate, [_run(2)], heartbeat))
    settling.join(1.0)
    assert settling.is_alive(), "settled while a query had no first offsets"
    heartbeat.desired = desired
    settling.join(10)
    assert not settling.is_alive(), f"the start went on settling after {desired}"
    assert not gate._settled.is_set()


def test_a_batch_held_at_the_gate_stops_at_its_boundary_once_its_pipeline_is_stopped():
    gate, held, raised = StartGate(), _run(1), []
    waiting = _in_thread(lambda: raised.append(pytest.raises(StopAtBatchBoundary, gate.pass_through, held, "t")))
    waiting.join(0.5)
    assert waiting.is_alive()
    held.stop_requested = "SAVEPOINT"
    waiting.join(10)
    assert raised and not waiting.is_alive()


@pytest.mark.parametrize("permanent, kind", [(True, PermanentError), (False, StartRefused)])
def test_a_refusal_at_the_start_refuses_the_held_preparation_naming_it(permanent, kind):
    gate = StartGate()
    gate.settle(_run(2, PipelineStatus.FAILED, "slot.name belongs to SeaTide job 'other-job'", permanent))
    with pytest.raises(kind, match="pipeline 2 of the job was refused at its start .*other-job.*nothing was removed"):
        gate.pass_through(_run(1), "t")


def test_a_start_that_does_not_settle_in_its_bound_refuses_the_pipeline_still_opening(monkeypatch):
    monkeypatch.setattr(pipeline_start, "START_SETTLES_WITHIN_S", 0.3)
    opening, refusals = _run(2), []
    opening.refuse = lambda error, permanent: refusals.append((error, permanent))
    gate = StartGate()
    pipeline_start._settle(gate, [opening], SimpleNamespace(desired="RUN"))
    assert gate._settled.is_set() and gate._refused is opening
    [(error, permanent)] = refusals
    assert not permanent and "pipeline 2 (Src) gave no first offsets" in error and "Getting offsets" in error
