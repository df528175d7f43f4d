"""The in-process harness judges a running attempt as the leader judges a driver
(``seatide.testing.attempt_watch``): a driver held inside a sink's write is given up by the
leader's own rules and the run fails, naming what hung, instead of holding the test forever.

Each job is held at ``driver.before_sink_write`` (a gate the test opens at its end), the place
where a Spark write that never ended held a test of the Http source for 900 s under load.
"""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import select

from seatide.store import schema as s
from seatide.store.jobs import request_stop
from seatide.testing.attempt_watch import AttemptHung
from seatide.timeouts import Timeouts
from tests.e2e.harness import InProcessCluster
from tests.held import Held

pytestmark = pytest.mark.spark


def stream(out, env: str = "") -> str:
    return f"""
env {{ job.mode = STREAMING, checkpoint.interval = 500 {env} }}
source {{ FakeSource {{ row.num = 1000, split.num = 100, split.read-interval = 200, sequence.field = "id",
                        schema = {{ fields {{ id = bigint }} }} }} }}
sink {{ LocalFile {{ path = "{out}", file_format_type = "json" }} }}
"""


def run_held(local, held, text: str, stop_after=None) -> AttemptHung:
    """Run ``text`` until the harness gives it up; then open the gate and let its driver end."""
    try:
        with pytest.raises(AttemptHung) as hung:
            local.run(text, stop_after=stop_after)
    finally:
        held.release()
        for thread in [t for t in threading.enumerate() if t.name == "in-process-driver"]:
            thread.join(120)
            assert not thread.is_alive(), "the held driver did not end once its gate opened"
    return hung.value


def lost_attempts(local) -> list:
    with local.store.read() as conn:
        return list(conn.execute(select(s.attempts.c.state, s.attempts.c.error)))


def test_a_write_that_makes_no_progress_fails_the_run_with_the_leaders_verdict(spark, tmp_path, monkeypatch):
    held = Held(monkeypatch, "driver.before_sink_write", tmp_path / "go")
    local = InProcessCluster(spark, str(tmp_path / "data"))
    began = time.monotonic()
    hung = run_held(local, held, stream(tmp_path / "out", ", job.progress-timeout = 3000, job.on-hung = fail"))
    message = str(hung)
    assert "job hung: pipeline 1 of attempt 1 committed no batch and completed no Spark task" in message
    assert "did not end within 15 s; a worker would kill it" in message
    assert "_write_sinks" in message and "failpoints.py" in message    # where the driver's thread was
    assert [a.state for a in lost_attempts(local)] == ["LOST"]
    assert time.monotonic() - began < 120


def test_a_driver_that_does_not_stop_after_a_cancel_fails_the_run(spark, tmp_path, monkeypatch):
    held = Held(monkeypatch, "driver.before_sink_write", tmp_path / "go")
    local = InProcessCluster(spark, str(tmp_path / "data"), timeouts=Timeouts(cancel_grace=3.0))

    def cancel_once_held(store, job_id):
        held.reached()
        request_stop(store, job_id, savepoint=False, actor="test")

    hung = run_held(local, held, stream(tmp_path / "out"), stop_after=cancel_once_held)
    message = str(hung)
    assert "driver did not stop within 3 s of the cancel" in message
    assert "request_stop" in message and "_write_sinks" in message   # the stop waits on the held batch
    assert [a.state for a in lost_attempts(local)] == ["LOST"]
