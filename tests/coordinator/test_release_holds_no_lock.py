"""A slot release on a SQLite store never makes a healthy driver fence itself.

The door (coordinator/door.py) drops a run's slot inside the leader's store transaction; on
SQLite that transaction holds the store's write lock, which every driver's heartbeat needs. A
slot still held by a walsender (a stream that is ending, a reader the user started) does not
drop until it is let go: if the door waited for that, longer than the self-fence (6 s), every
driver on the store would stop itself. Here a real replication connection (``pg_recvlogical``)
holds the slot for the self-fence and 2 s more, ended by the test, while another job's driver
heartbeat keeps renewing; the release must be done once the slot is free.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time

import pytest
from sqlalchemy import select, update

from seatide.config.loader import load_job_text
from seatide.connectors.postgres_cdc import slot
from seatide.coordinator.release import RELEASING, Releaser, due_releases
from seatide.plan.dag import build_plan
from seatide.plan.outline import outline_json
from seatide.runtime.heartbeat import Heartbeat
from seatide.runtime.reporter import AttemptReporter
from seatide.store import schema as s
from seatide.store.db import open_store
from seatide.store.jobs import submit_job
from seatide.store.runs import run_key
from seatide.timeouts import Timeouts
from tests.coordinator.test_stale_leader import _cdc_job, _leader, _slots
from tests.store.test_store import JOB, _attempt

SELF_FENCE_S = Timeouts.driver_self_fence_after


@pytest.fixture
def sqlite_store(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/state.db")
    yield store
    store.dispose()


def _submit(store, tmp_path, text: str, job_id: str) -> None:
    config = load_job_text(text)
    submit_job(store, text=text, variables={}, config=config, plan=build_plan(config),
               outline=outline_json(config), data_dir=str(tmp_path), job_id=job_id)


def _released(store) -> bool:
    with store.read() as conn:
        return conn.execute(select(s.jobs.c.release).where(s.jobs.c.job_id == "j1")).scalar() == "RELEASED"


def _slot_active(server, name: str) -> bool:
    with server.connect() as conn:
        row = conn.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (name,)).fetchone()
        return bool(row and row[0])


def _wait_for(condition, within_s: float, what: str) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {within_s} s: {what}"
        time.sleep(0.1)


def _hold(server, name: str) -> subprocess.Popen:
    """A replication connection streaming from the slot (a walsender holds it while this runs)."""
    command = [os.path.join(server.bin, "pg_recvlogical"), "-h", "127.0.0.1", "-p", str(server.port),
               "-U", "postgres", "-d", "postgres", "-S", name, "--start", "-f", "/dev/null"]
    holder = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _wait_for(lambda: _slot_active(server, name), 20, "the replication connection holds the slot")
    return holder


def cancelled_with_a_slot(store, tmp_path, server) -> str:
    """Job j1 of a Postgres-CDC source, cancelled, its release decided; its slot made: its name."""
    _submit(store, tmp_path, _cdc_job(server), "j1")
    with store.read() as conn:
        run = conn.execute(select(s.jobs.c.run_id)).scalar()
    name = slot.default_name(run_key("j1", run), 1, "source0")
    with server.connect() as conn:
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (name,))
    with store.write() as conn:
        conn.execute(update(s.jobs).values(status="CANCELED", finished_at=time.time(), release=RELEASING))
    return name


def test_a_release_on_sqlite_waiting_for_a_held_slot_never_fences_a_healthy_driver(sqlite_store, tmp_path,
                                                                                    private_postgres):
    store = sqlite_store
    name = cancelled_with_a_slot(store, tmp_path, private_postgres)
    _submit(store, tmp_path, JOB, "j2")      # a healthy job whose driver heartbeats on the same store
    fenced = threading.Event()
    heartbeat = Heartbeat(AttemptReporter(store, "j2", 1, _attempt(store, "j2")), 0.5, SELF_FENCE_S,
                          on_fenced=fenced.set).start()
    holder = _hold(private_postgres, name)
    lease = _leader(store, "c1")
    [due] = due_releases(store)
    releaser, leading = Releaser(store, "coordinator:c1"), threading.Event()

    def coordinator_ticks() -> None:        # the leader's loop: the lease tick, then the release step
        while not _released(store) and not fenced.is_set():
            if lease.tick():
                leading.set()
                releaser.step(lease.epoch, due, time.time())
            time.sleep(0.2)

    ticks = threading.Thread(target=coordinator_ticks, daemon=True)
    try:
        ticks.start()
        held_until = time.monotonic() + SELF_FENCE_S + 2.0
        _wait_for(lambda: time.monotonic() > held_until or fenced.is_set(), SELF_FENCE_S + 5, "the hold")
        assert not fenced.is_set(), "a healthy driver fenced itself while the release waited for the slot"
    finally:
        holder.terminate()
        holder.wait(10)
    _wait_for(lambda: _released(store) or fenced.is_set(), 60, "the release, once the slot is free")
    ticks.join(30)
    heartbeat.stop()
    assert not fenced.is_set(), "a healthy driver fenced itself while the release waited for the slot"
    assert _slots(private_postgres, name) == []
