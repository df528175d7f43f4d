"""A driver whose job is canceled while its Spark session still starts ends its attempt then.

Before, it waited for Spark (seconds, a minute on a loaded host), started its queries and their
Python workers, and stopped only at its first micro-batch's boundary: in CI a cancel right
after a restart took 26 s (tests/cluster/test_store_clock.py, 2026-11-30)."""

from __future__ import annotations

import time
from concurrent.futures import Future
from types import SimpleNamespace

import pytest

from seatide.runtime.driver import await_session
from tests.stores import sqlite_only


def test_a_cancel_ends_the_wait_for_a_session_that_never_comes():
    began = time.monotonic()
    assert await_session(Future(), SimpleNamespace(desired="CANCEL"), poll=0.05) is None
    assert time.monotonic() - began < 2


def test_a_session_that_comes_is_used_while_the_job_runs():
    session = Future()
    session.set_result("spark")
    assert await_session(session, SimpleNamespace(desired="RUN"), poll=0.05) == "spark"


def test_a_session_already_up_is_used_even_once_canceled():
    """Spark up: the queries' own stop path records a cancel (each pipeline stops at its boundary)."""
    session = Future()
    session.set_result("spark")
    assert await_session(session, SimpleNamespace(desired="CANCEL"), poll=0.05) == "spark"


def test_a_spark_start_that_fails_with_a_timeout_fails_the_wait():
    """A session whose start raised TimeoutError (concurrent.futures' own is the builtin since
    Python 3.11) is a failed start, not one still coming: the wait raises it (outside review:
    it looped without end while the heartbeat went on)."""
    session = Future()
    session.set_exception(TimeoutError("the gateway did not answer"))
    with pytest.raises(TimeoutError, match="gateway"):
        run_with_deadline(lambda: await_session(session, SimpleNamespace(desired="RUN"), poll=0.05), 30)


def run_with_deadline(call, seconds: float):
    """``call()`` in a thread; an AssertionError if it has not returned within ``seconds``."""
    import threading

    out: list = []

    def run():
        try:
            out.append(("ok", call()))
        except BaseException as exc:      # handed to the test's thread
            out.append(("raised", exc))
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert out, f"still waiting after {seconds} s"
    kind, value = out[0]
    if kind == "raised":
        raise value
    return value


@pytest.mark.cluster        # a driver process of its own
@sqlite_only
def test_a_driver_starting_spark_cold_answers_a_cancel_without_waiting_for_it(store_url, tmp_path):
    """A driver given no early session (the worker's hint that its attempt ends without Spark,
    runtime/data_ends.py, or a config error) starts Spark itself once it finds work left: a
    cancel then ends the wait as it does for an early session (outside review: it waited for the
    whole JVM start, which on a loaded host outlasts the cancel grace, and was killed and LOST).
    The driver process here runs with the job already canceled, so its wait ends at the first
    poll and its log says so; before, it built the session and then found nothing to start."""
    import os
    import subprocess
    import sys

    from sqlalchemy import select

    from seatide.config.loader import load_job_text
    from seatide.plan.dag import build_plan
    from seatide.plan.outline import outline_json
    from seatide.runtime.session import SPARK_CONF_ENV
    from seatide.store import schema as s
    from seatide.store.db import open_store
    from seatide.store.jobs import request_stop, submit_job
    from seatide.testing.jobs import batch_job
    from tests.contract.harness import new_attempt

    store = open_store(store_url)
    text = batch_job(str(tmp_path / "out"))
    config = load_job_text(text)
    submit_job(store, text=text, variables={}, config=config, plan=build_plan(config),
               outline=outline_json(config), data_dir=str(tmp_path), job_id="j1")
    attempt = new_attempt(store, "j1", 1)
    request_stop(store, "j1")
    env = {k: v for k, v in os.environ.items() if k != SPARK_CONF_ENV}       # launched cold, as hinted
    done = subprocess.run([sys.executable, "-m", "seatide.runtime.driver", "driver", "--store", store_url,
                           "--job-id", "j1", "--attempt", str(attempt), "--heartbeat-interval", "0.2"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "job canceled while Spark started; no query started" in done.stderr, done.stderr[-3000:]
    with store.read() as conn:
        assert conn.execute(select(s.attempts.c.state).where(s.attempts.c.attempt_id == attempt)).scalar() == "SUCCEEDED"
    store.dispose()
