"""A driver whose job is canceled while its Spark session still starts ends its attempt then.

Before, it waited for Spark (seconds, a minute on a loaded host), started its queries and their
Python workers, and stopped only at its first micro-batch's boundary: in CI a cancel right
after a restart took 26 s (tests/cluster/test_store_clock.py, 2026-11-30)."""

from __future__ import annotations

import time
from concurrent.futures import Future
from types import SimpleNamespace

from seatide.runtime.driver import await_session


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
    import pytest

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
