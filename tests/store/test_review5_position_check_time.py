"""Outside review 5 (failing on purpose): the resume's early position check (1f28c99,
coordinator/source_watch.positions_gone) asks each source of each pipeline restored in place
one after another, each bounded by 5 s only on its own. A source server that takes TCP
connections but does not answer (a stuck server, a load balancer with no backend: here a
listener the test holds) makes the resume's answer wait 5 s per source: with 7 pipelines it
comes after the 30 s the CLI's HTTP client waits for it (cli/client.py), so `seatide resume
--cluster` fails with a timeout while the coordinator records the resume after all.
Before 1f28c99 a resume did no network I/O at all."""

from __future__ import annotations

import os
import socket
import threading
import time

from sqlalchemy import select, update

from seatide import intents
from seatide.store import schema as s
from seatide.store.runs import spark_checkpoint_dir
from tests.store.test_store import _end, store, submit  # noqa: F401  (store is a fixture)

PIPELINES = 7
HTTP_CLIENT_TIMEOUT_S = 30      # cli/client.py HttpClient.call: urlopen(..., timeout=30)


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


def test_a_resume_answers_within_the_cli_timeout_when_source_servers_do_not_answer(store, tmp_path):
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
        began = time.monotonic()
        intents.resume(store, "j1", actor="cli")
        took = time.monotonic() - began
        with store.read() as conn:
            status = conn.execute(select(s.jobs.c.status).where(s.jobs.c.job_id == "j1")).scalar()
        assert status == "CREATED"      # recorded, as it should be: nothing is known to be gone
        assert took < HTTP_CLIENT_TIMEOUT_S, (
            f"the resume answered after {took:.1f} s: its early position check waited on each of "
            f"{PIPELINES} sources in turn; the CLI's HTTP client gives up after {HTTP_CLIENT_TIMEOUT_S} s")
    finally:
        listener.close()
