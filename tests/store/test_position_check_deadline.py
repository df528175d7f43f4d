"""The resume's early position check (coordinator/position_check.positions_gone) against source
servers that take TCP connections and never answer (a stuck server, a load balancer with no
backend: here a listener the test holds). Every source is asked at once under one deadline, so the
resume is answered well within the 30 s the CLI's HTTP client waits (cli/http_client.py), and a source
not answered by then is left to its driver's read, as an unreachable one is: the resume is recorded.
The CLI's own answer to a coordinator that does not answer in time is a clear error, not a traceback."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest
from sqlalchemy import select, update

from seatide import intents
from seatide.cli.args import EXIT_FAILED
from seatide.cli.client import HttpClient, Refused, resume_job
from seatide.store import schema as s
from seatide.store.runs import spark_checkpoint_dir
from tests.store.test_store import _end, store, submit  # noqa: F401  (store is a fixture)
from tests.stores import sqlite_only

# Three silent sources tell one deadline (≈5 s) from one after another (≈3 x 10 s). Each also costs
# every config load (submit, the measured load, the resume's) its describe timeout: cut to 1 s here
# (quick_catalog_load), as the load is not the subject (5 s of it made this test 50 s long).
PIPELINES = 3
CHECK_DEADLINE_S = 5            # position_check.positions_gone: the whole check


def _job(port: int) -> str:
    parts = []
    for i in range(PIPELINES):
        parts.append(f"""source {{ Postgres-CDC {{ plugin_output = "s{i}"
  base-url = "jdbc:postgresql://127.0.0.1:{port}/test", username = "postgres", password = ""
  database-names = ["test"], schema-names = ["public"], table-names = ["test.public.t{i}"] }} }}
sink {{ Console {{ plugin_input = "s{i}" }} }}
""")
    return 'env { job.mode = "STREAMING" }\n' + "".join(parts)


def _silent_server():
    """Takes connections and never answers (held until the test ends)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held = []

    def serve():
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return
    threading.Thread(target=serve, daemon=True).start()
    return listener, held


def _checkpointed_at_lsn(directory: str) -> None:
    """A Spark checkpoint whose batch 0 committed at LSN 0/1000 (what a running job leaves)."""
    spark = spark_checkpoint_dir(directory)
    for log in ("offsets", "commits"):
        os.makedirs(os.path.join(spark, log), exist_ok=True)
    with open(os.path.join(spark, "offsets", "0"), "w") as out:
        out.write('v1\n{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{}}\n'
                  '{"lsn": 4096, "snapshot": null, "splits": [], "tables": ["test.public.t0"]}\n')
    with open(os.path.join(spark, "commits", "0"), "w") as out:
        out.write('v1\n{"nextBatchWatermarkMs":0}\n')


@sqlite_only      # the store is not the subject: the sources' silence is
def test_the_resumes_position_check_waits_one_deadline_for_all_sources_that_do_not_answer(store, tmp_path,
                                                                                           quick_catalog_load):
    listener, _held = _silent_server()
    try:
        text = _job(listener.getsockname()[1])
        submit(store, tmp_path, text=text)
        with store.read() as conn:
            dirs = [p.checkpoint_dir for p in conn.execute(select(s.pipelines).where(s.pipelines.c.job_id == "j1"))]
        assert len(dirs) == PIPELINES
        for directory in dirs:
            _checkpointed_at_lsn(directory)
        with store.write() as conn:
            conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "j1").values(last_batch_id=0))
        _end(store, "j1", "CANCELED", "CLEAN")
        # Loading the config asks each source for its tables first (plan/catalog.py, 5 s each when
        # its server does not answer): measured alone, so what the position check adds is seen.
        began = time.monotonic()
        intents.check(text)
        loading = time.monotonic() - began
        began = time.monotonic()
        intents.resume(store, "j1", actor="cli")
        took = time.monotonic() - began
        with store.read() as conn:
            status = conn.execute(select(s.jobs.c.status).where(s.jobs.c.job_id == "j1")).scalar()
        assert status == "CREATED"      # recorded, as it should be: nothing is known to be gone
        # one deadline for every source, plus the store's work and a loaded machine's slack: not one source after another
        assert took - loading < CHECK_DEADLINE_S + 5, (
            f"the resume answered after {took:.1f} s ({loading:.1f} s of it loading the config) with "
            f"{PIPELINES} sources that do not answer")
    finally:
        listener.close()


def test_the_cli_says_which_cluster_did_not_answer_a_resume_in_time_and_how_on():
    listener, _held = _silent_server()     # a coordinator that takes the request and never answers
    try:
        base = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(Refused) as refused:
            resume_job(HttpClient(base, timeout_s=1), "j1")
        assert refused.value.code == EXIT_FAILED         # client_command prints it and exits 1: no traceback
        message = str(refused.value)
        assert f"the cluster at {base} did not answer POST /jobs/j1/incarnations within 1 s" in message
        assert "it may still have been done" in message and f"seatide status JOB_ID --cluster {base}" in message
    finally:
        listener.close()
