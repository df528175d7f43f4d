"""Revision 0021 keeps a SeaTide from before recorded environments from reading a marked job (outside review M1,
F3): that version knows no ``$env`` mark and would fill a marked job's ``${NAME}`` from its own process's
environment.

* One that starts refuses the store. Simulated as it is: this package's code, with its revisions cut back to
  the last one it shipped (0020) and that head, opening the store in a process of its own as every driver,
  worker and coordinator does when it starts.
* One already running has a presence row without ``features`` (it registered as that version does: no such
  column): no marked job is recorded while such a coordinator may lead, and the leader gives such a worker no
  job (store/node_features.py). Its row is written as the older ``register_node`` wrote it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from sqlalchemy import insert, select, text, update

from seatide import intents
from seatide.coordinator.service import Coordinator, register_node
from seatide.intents import Refusal, RefusalKind
from seatide.store import schema as s
from seatide.store.clock import read_store_now
from seatide.store.db import open_store
from seatide.store.node_features import OLDER_ALIVE_WITHIN_S

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BEFORE = "0020"      # the last revision of a SeaTide that did not record environments
JOB = """
env { job.mode = BATCH, job.name = ${SEATIDE_GATE_NAME} }
source { FakeSource { row.num = 1, schema = { fields { id = bigint } } } }
sink { Console {} }
"""
# A SeaTide that knows revisions up to BEFORE only, opening the store.
OLDER = """
import shutil, sys
from seatide.store import migrations
url, scripts, before = sys.argv[1:]
shutil.copytree(migrations.SCRIPTS, scripts, ignore=lambda _dir, names: [
    n for n in names if n == "__pycache__" or (n[:4].isdigit() and n[:4] > before)])
migrations.SCRIPTS, migrations.HEAD = scripts, before
from seatide.store.db import StoreUnavailable, open_store
try:
    open_store(url).dispose()
except StoreUnavailable as exc:
    print("REFUSED:", exc)
    sys.exit(3)
print("OPENED")
"""


def open_as_older(url: str, tmp_path) -> subprocess.CompletedProcess:
    scripts = tmp_path / f"older-{len(list(tmp_path.glob('older-*')))}"
    return subprocess.run([sys.executable, "-c", OLDER, url, str(scripts), BEFORE], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_a_seatide_from_before_recorded_environments_refuses_a_store_with_a_marked_job(store_url, tmp_path):
    store = open_store(store_url)
    try:
        # The store as the older version left it: its revision; that version opens it (the simulation is sound).
        with store.write() as conn:
            conn.execute(text(f"UPDATE alembic_version SET version_num = '{BEFORE}'"))
            conn.execute(text("ALTER TABLE nodes DROP COLUMN features"))
        older = open_as_older(store_url, tmp_path)
        assert (older.returncode, older.stdout.strip()) == (0, "OPENED"), older.stderr[-2000:]
    finally:
        store.dispose()

    store = open_store(store_url)      # this version: the gate's revision, then a job with its environment marked
    try:
        intents.submit(store, str(tmp_path), text=JOB, job_id="marked", actor="test",
                       environment={"SEATIDE_GATE_NAME": "as-submitted"})
        with store.read() as conn:
            variables = json.loads(conn.execute(select(s.jobs.c.variables)).scalar())
        assert variables == {"$env": "1", "$env.SEATIDE_GATE_NAME": "as-submitted", "$as-given": "1"}
    finally:
        store.dispose()

    older = open_as_older(store_url, tmp_path)
    assert older.returncode == 3, (older.stdout, older.stderr[-2000:])
    assert f"newer than this SeaTide (head {BEFORE}); upgrade SeaTide" in older.stdout, older.stdout
    assert "Traceback" not in older.stdout + older.stderr


def register_as_older(store, node_id: str, role: str, slots: int = 0) -> None:
    """The presence row an older SeaTide's process writes: the columns it knows, no ``features``."""
    with store.write() as conn:
        now = read_store_now(conn)
        conn.execute(insert(s.nodes).values(node_id=node_id, role=role, host="older-host", pid=4242, url=None,
                                            slots=slots, started_at=now, heartbeat_at=now, stopped=False,
                                            liveness=False))


def _variables(store, job_id: str):
    with store.read() as conn:
        row = conn.execute(select(s.jobs.c.incarnation, s.jobs.c.variables).where(s.jobs.c.job_id == job_id)).first()
    return None if row is None else (row.incarnation, json.loads(row.variables))


def test_no_marked_job_is_recorded_while_an_older_coordinator_may_lead(store_url, tmp_path):
    store = open_store(store_url)
    try:
        intents.submit(store, str(tmp_path), text=JOB, job_id="before", actor="test",
                       environment={"SEATIDE_GATE_NAME": "first"})
        intents.stop(store, "before", actor="test")
        register_as_older(store, "older-c", "coordinator")       # running since before the upgrade
        with pytest.raises(Refusal) as refused:
            intents.submit(store, str(tmp_path), text=JOB, job_id="marked", actor="test",
                           environment={"SEATIDE_GATE_NAME": "as-submitted"})
        assert refused.value.kind == RefusalKind.CONFLICT
        message = str(refused.value)
        assert "coordinator older-c (pid 4242 on older-host) of an older SeaTide" in message, message
        assert "Nothing was submitted. Stop every coordinator of the older version" in message, message
        assert _variables(store, "marked") is None
        with pytest.raises(Refusal, match="Nothing was resumed"):     # a new incarnation of a marked row too
            intents.resume(store, "before", variables={"other": "1"}, fallback="fresh", actor="test")
        assert _variables(store, "before")[0] == 1

        with store.write() as conn:      # silent past the window (crashed): no longer taken for alive
            conn.execute(update(s.nodes).where(s.nodes.c.node_id == "older-c")
                         .values(heartbeat_at=read_store_now(conn) - OLDER_ALIVE_WITHIN_S - 1))
        intents.submit(store, str(tmp_path), text=JOB, job_id="marked", actor="test",
                       environment={"SEATIDE_GATE_NAME": "as-submitted"})
        assert _variables(store, "marked")[1]["$env.SEATIDE_GATE_NAME"] == "as-submitted"
    finally:
        store.dispose()


def test_a_stopped_older_coordinator_holds_nothing_back(store_url, tmp_path):
    store = open_store(store_url)
    try:
        register_as_older(store, "older-c", "coordinator")
        with store.write() as conn:      # a clean stop marks its row
            conn.execute(update(s.nodes).where(s.nodes.c.node_id == "older-c").values(stopped=True))
        intents.submit(store, str(tmp_path), text=JOB, job_id="marked", actor="test",
                       environment={"SEATIDE_GATE_NAME": "as-submitted"})
        assert _variables(store, "marked") == (1, {"$env": "1", "$env.SEATIDE_GATE_NAME": "as-submitted", "$as-given": "1"})
    finally:
        store.dispose()


def test_the_leader_gives_no_job_to_a_worker_of_an_older_seatide(store_url, tmp_path):
    store = open_store(store_url)
    leader = Coordinator(store, node_id="c1")
    try:
        register_as_older(store, "older-w", "worker", slots=4)        # idle, alive, heartbeating
        intents.submit(store, str(tmp_path), text=JOB, job_id="marked", actor="test",
                       environment={"SEATIDE_GATE_NAME": "as-submitted"})

        def assigned():
            with store.read() as conn:
                return conn.execute(select(s.attempts.c.worker_id).where(s.attempts.c.job_id == "marked")).all()

        for _ in range(3):
            leader.lease.tick()
            leader.reconcile_all()
        assert leader.lease.is_leader
        assert assigned() == []
        register_node(store, "new-w", "worker", slots=1)
        leader.reconcile_all()
        assert [row.worker_id for row in assigned()] == ["new-w"]
    finally:
        leader.lease.resign()
        store.dispose()
