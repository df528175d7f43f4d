"""The attempt's start gate (runtime/start_gate.py) and the start's settling (pipeline_start._settle), without
Spark: every wait ends on a stop, and a refusal reaches the batch held there (outside review F3; the e2e proofs with
a real server are in tests/connectors/test_postgres_cdc_start_order.py)."""

from __future__ import annotations

import threading
import time
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


def _run(pipeline_id: int, status=PipelineStatus.RUNNING, error=None, permanent=False, began_batch=False):
    outcome = SimpleNamespace(status=status, error=error, permanent=permanent)
    marks: list = []        # what the driver wrote of its start's wait (reporter.mark_pipeline)
    return SimpleNamespace(pipeline=SimpleNamespace(pipeline_id=pipeline_id, sources=[SimpleNamespace(name="Src")]),
                           query=_Opening(), outcome=outcome, stop_requested=None, poll=lambda: outcome,
                           refuse=lambda error, permanent: None, sinks=None, began_batch=began_batch, marks=marks,
                           reporter=SimpleNamespace(mark_pipeline=lambda pid, waiting: marks.append(waiting)))


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


def test_a_start_that_does_not_settle_waits_as_long_as_the_job_runs_saying_what_for(monkeypatch):
    """F3/F4: past a fixed bound of its own (300 s), the start refused the pipeline still opening, and failed a
    job whose settings let it run (job.on-hung = warn, checkpoint.on-stale = warn: a Postgres-CDC source making
    its slot behind a long transaction). Now it waits, with the pipeline's row saying what for, then settles."""
    monkeypatch.setattr(pipeline_start, "START_SETTLES_WITHIN_S", 0.3, raising=False)   # the old bound, shortened
    opening, refusals = _run(2), []
    opening.refuse = lambda error, permanent: refusals.append(error)
    gate = StartGate()
    settling = _in_thread(lambda: pipeline_start._settle(gate, [opening], SimpleNamespace(desired="RUN")))
    settling.join(1.5)
    assert settling.is_alive() and not refusals and not gate._settled.is_set(), refusals
    assert opening.marks == ["starting: pipeline 2 waits for its first offsets (sources Src; "
                             "Spark: 'Getting offsets from PythonMicroBatchStream')"], opening.marks
    opening.query = SimpleNamespace(isActive=True, recentProgress=[{}], status={"message": "Waiting for data"})
    settling.join(10)
    assert not settling.is_alive() and gate._settled.is_set() and gate._refused is None
    assert opening.marks[-1] is None, "the wait was not cleared once the start settled"


def test_a_pipeline_that_failed_in_a_batch_is_not_said_to_be_refused_at_its_start():
    """F6: a pipeline that failed on a transient sink write in its first batch was told to the held ones as
    "refused at its start"; now as what it was."""
    failed = _run(2, PipelineStatus.FAILED, "connection reset by peer", began_batch=True)
    gate = StartGate()
    pipeline_start._settle(gate, [failed], SimpleNamespace(desired="RUN"))
    with pytest.raises(StartRefused) as refused:
        gate.pass_through(_run(1), "t")
    assert "pipeline 2 of the job failed while the job's start was settling (connection reset by peer)" in str(
        refused.value) and "refused at its start" not in str(refused.value), refused.value


class _Initializing:
    """A query whose sources are being made (a Python source's worker connecting back)."""
    isActive = True
    recentProgress: list = []
    status = {"message": "Initializing sources"}


def test_a_savepoint_during_the_start_still_lets_each_query_make_its_sources_before_the_next():
    """F5: with a savepoint asked, ``wait_started`` returned at once, so every query not started yet started
    together (their Python workers then missing Spark's 10 s connect-back on a loaded host). Now it waits while
    the query's sources are made, and no longer: not for first offsets, which a savepoint does not need."""
    run = SimpleNamespace(query=_Initializing(), outcome=SimpleNamespace(status=PipelineStatus.FAILED))
    savepoint = SimpleNamespace(desired="SAVEPOINT")
    waiting = _in_thread(lambda: pipeline_start.wait_started(run, timeout_s=30, heartbeat=savepoint))
    waiting.join(1.0)
    assert waiting.is_alive(), "the next query would start beside one still making its sources"
    run.query.status = {"message": "Getting offsets from PythonMicroBatchStream"}
    waiting.join(10)
    assert not waiting.is_alive(), "a savepoint waited for first offsets"
    cancel = SimpleNamespace(desired="CANCEL")
    run.query.status = {"message": "Initializing sources"}
    assert pipeline_start.wait_started(run, timeout_s=30, heartbeat=cancel) is False


class _Query:
    """A started query in its first batch (held at the gate), that records its stop."""
    isActive, recentProgress, lastProgress, stopped = True, [], None, False
    status = {"message": "Processing new data", "isTriggerActive": True, "isDataAvailable": True}

    def stop(self):
        self.stopped = True


def _pipeline_run(tmp_path, failed: list):
    from seatide.runtime.pipeline_run import PipelineRun

    reporter = SimpleNamespace(checkpoint_failed=lambda *args: failed.append(args), mark_pipeline=lambda *a, **k: None)
    pipeline = SimpleNamespace(pipeline_id=1, sources=[], fingerprint=lambda: "f")
    run = PipelineRun(None, pipeline, SimpleNamespace(checkpoint_timeout_ms=100), "j", str(tmp_path), reporter, None)
    run.query = _Query()
    return run


def test_a_batch_held_at_the_gate_past_checkpoint_timeout_is_no_timed_out_checkpoint(tmp_path):
    """F7: ``poll`` during the start's settling counted the held first batch as a checkpoint past checkpoint.timeout
    (a CHECKPOINT_TIMED_OUT event, a failed-checkpoint count); its clock starts once it is let through."""
    failed, gate = [], StartGate()
    run = _pipeline_run(tmp_path, failed)
    held = _in_thread(lambda: gate.pass_through(run, "t"))
    deadline = time.monotonic() + 10
    while not run.held_at_start and time.monotonic() < deadline:
        time.sleep(0.01)
    for _ in range(4):              # 0.6 s held, checkpoint.timeout 0.1 s
        run.poll()
        time.sleep(0.15)
    assert not failed, failed
    gate.settle()
    held.join(10)
    run.poll()
    time.sleep(0.15)
    run.poll()
    assert len(failed) == 1, "a batch running late once let through is still told"


def test_a_refused_pipeline_whose_query_started_has_it_stopped(tmp_path):
    """F7: ``refuse`` set the outcome only; a started query ran on until the driver's exit."""
    run = _pipeline_run(tmp_path, [])
    run.refuse("not started: ...", permanent=False)
    assert run.query.stopped and run.outcome.status == PipelineStatus.FAILED


class _EndsOnItsSecondLook:
    """A query refused at its first offsets: active at the first look at it, ended (failed) from the second on."""
    recentProgress: list = []
    status = {"message": "Getting offsets from PythonMicroBatchStream"}

    def __init__(self):
        self.looks = 0

    @property
    def isActive(self) -> bool:
        self.looks += 1
        return self.looks == 1


def test_a_query_refused_while_the_start_settles_is_never_taken_for_one_past_its_opening():
    """Whichever look at the query comes first, the one that sees it ended sees its refusal: the gate refuses
    (outside review 3, F1: the outcome was polled first and the opening after, so a query ending in between
    was neither failed nor opening, and the gate opened for a sink that removes data)."""
    run = _run(2)
    query = run.query = _EndsOnItsSecondLook()

    def poll():     # PipelineRun.poll: RUNNING while the query is active, FAILED once it ended with an exception
        if not query.isActive:
            run.outcome.status, run.outcome.error = PipelineStatus.FAILED, "slot.name belongs to job other"
        return run.outcome
    run.poll = poll
    gate = StartGate()
    pipeline_start._settle(gate, [run], SimpleNamespace(desired="RUN"))
    held = SimpleNamespace(pipeline=SimpleNamespace(pipeline_id=1), stop_requested=None, held_at_start=False)
    with pytest.raises(StartRefused):
        gate.pass_through(held, "target")


class _PastItsOpening:
    """A query in its first batch: no longer opening."""
    isActive = True
    recentProgress = [{"batchId": 0}]
    status = {"message": "Processing new data"}


def test_a_query_started_again_by_a_poll_while_the_start_settles_is_waited_for_and_its_refusal_seen():
    """Review 4, F3: a poll that starts a pipeline's query again (a schema change's stop) put an opening query in
    place of one past its opening after the settling had looked; the gate opened for a sink that removes data,
    and the new query was then refused at its first offsets. Now the settling looks at the new query."""
    run, restarted = _run(2), _Opening()
    run.query = _PastItsOpening()

    def poll():     # the first poll restarts the query (PipelineRun._restart_for); its source is refused later
        run.query = restarted
        if not restarted.isActive:
            run.outcome.status, run.outcome.error = PipelineStatus.FAILED, "slot.name belongs to job other"
        return run.outcome
    run.poll = poll
    gate = StartGate()
    settling = _in_thread(lambda: pipeline_start._settle(gate, [run], SimpleNamespace(desired="RUN")))
    settling.join(1.0)
    assert settling.is_alive() and not gate._settled.is_set(), "settled before the restarted query had its offsets"
    restarted.isActive = False
    settling.join(10)
    assert not settling.is_alive()
    with pytest.raises(StartRefused):
        gate.pass_through(_run(1), "target")
