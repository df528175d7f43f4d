"""A slot a release leaves (no run's to drop) is shown whatever run or job row it came from, until it is gone.

Review finding F2: the RELEASE_LEFT_HELD event of finding 4 was stored under the releasing run, and job-info,
``seatide status`` and the job's events show only the job id's current run: a dead run's release (the id
submitted again) or an expiry that forgets the job row left a slot retaining WAL that nothing showed. Now a
``left_held`` row is kept, shown by job-info (``leftBehind``), status, the events of the job id and the
cluster's overview, until the leader finds the slot gone (coordinator/left_held_watch.py). Real slots on a
private PostgreSQL server; the store both SQLite and PostgreSQL.
"""
from __future__ import annotations

import time
from types import SimpleNamespace

from sqlalchemy import select, update

from seatide.cli.client import client_command, left_line, retained_lines
from seatide.coordinator.cleanup import due_results, reconcile_cleanup
from seatide.coordinator.left_held_watch import look_at_left_held
from seatide.plugin.contexts import HeldPosition
from seatide.store import schema as s
from seatide.store.left_held import left_behind, record_left_held
from seatide.store.views import job_events, job_info, overview
from tests.conftest import store_url  # noqa: F401  (a fixture)
from tests.connectors.cdc_servers import private_postgres  # noqa: F401  (a fixture)
from tests.coordinator.test_stale_leader import _leader, _slots
from tests.coordinator.test_user_named_slot import SLOT, _cdc_job, _end, _fresh_slot, _submit
from tests.store.test_store import store  # noqa: F401  (a fixture)


def _expire(store, incarnation: int) -> None:
    """The leader's history expiry of the job's result of ``incarnation``, due now."""
    with store.write() as conn:
        conn.execute(update(s.job_results).where(s.job_results.c.incarnation == incarnation).values(expires_at=0.0))
    lease = _leader(store, "c1")
    [expiring] = [r for r in due_results(store, time.time()) if r.incarnation == incarnation]
    reconcile_cleanup(store, lease.epoch, "coordinator:c1", expiring, [].append)
    return lease


def _listed(url: str, tmp_path, capsys) -> list[str]:
    """The LEFT lines of ``seatide list`` on the store."""
    capsys.readouterr()
    args = SimpleNamespace(cluster=None, store=url, data_dir=str(tmp_path), api_token_file=None, command="list",
                           json=False)
    assert client_command(args) == 0
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("LEFT")]


def _drop_slot(server) -> None:
    with server.connect() as conn:
        if _slots(server, SLOT):
            conn.execute("SELECT pg_drop_replication_slot(%s)", (SLOT,))
        conn.execute(f'DROP PUBLICATION IF EXISTS "{SLOT}"')


def test_a_slot_left_by_a_dead_runs_expiry_is_shown_with_the_job_ids_new_run(store, tmp_path, private_postgres):
    """The review's scenario: j1 names a slot an earlier SeaTide marked, is refused at its fresh start (FAILED),
    is submitted again with a slot.name of its own, and the old run's expiry leaves the slot."""
    _submit(store, tmp_path, _cdc_job(private_postgres), "j1")
    _fresh_slot(private_postgres)
    _end(store, "j1", "FAILED")
    _submit(store, tmp_path, _cdc_job(private_postgres, "other_slot_name"), "j1")
    try:
        _expire(store, 1)
        assert _slots(private_postgres, SLOT) == [SLOT], "an old-marked slot was dropped"
        with store.read() as conn:
            shown = [e for e in job_events(conn, "j1") if e["kind"] == "RELEASE_LEFT_HELD"]
            info = job_info(conn, "j1")
            cluster = overview(conn)["leftBehind"]
        assert len(shown) == 1 and shown[0]["detail"]["holds"] == SLOT, shown
        [left] = info["leftBehind"]
        with store.read() as conn:
            current_run = conn.execute(select(s.jobs.c.run_id).where(s.jobs.c.job_id == "j1")).scalar()
        assert left["holds"] == SLOT and left["run"] != current_run, (left, current_run)   # the dead run's
        assert f"pg_drop_replication_slot('{SLOT}')" in left["settle"], left
        [line] = [line for line in retained_lines(info) if line.startswith("LEFT")]
        assert SLOT in line and left["settle"] in line, line
        assert [(c["jobId"], c["holds"]) for c in cluster] == [("j1", SLOT)], cluster
    finally:
        _drop_slot(private_postgres)


def test_a_slot_left_by_the_expiry_that_forgets_the_job_is_shown_until_it_is_dropped(store, store_url, tmp_path,
                                                                                  private_postgres, capsys):
    """Never submitted again: the expiry releases, leaves the slot and forgets the job row. The cluster's
    overview shows it still, and the leader's look drops the row, with an event, once the slot is gone."""
    _submit(store, tmp_path, _cdc_job(private_postgres), "j1")
    _fresh_slot(private_postgres)
    _end(store, "j1", "FAILED")
    try:
        lease = _expire(store, 1)
        with store.read() as conn:
            assert job_info(conn, "j1") is None                      # forgotten
            [left] = overview(conn)["leftBehind"]
        assert left["jobId"] == "j1" and left["holds"] == SLOT and left["retainedBytes"] is not None, left
        assert _listed(store_url, tmp_path, capsys) == [left_line(left, job=True)]     # seatide list says it
        assert look_at_left_held(store, lease.epoch, "coordinator:c1", 5.0) == 0     # still there: kept
        with store.read() as conn:
            assert [r["holds"] for r in overview(conn)["leftBehind"]] == [SLOT]
        _drop_slot(private_postgres)                                 # the operator settles it
        assert look_at_left_held(store, lease.epoch, "coordinator:c1", 5.0) == 1
        with store.read() as conn:
            assert overview(conn)["leftBehind"] == []
            kinds = [e["kind"] for e in job_events(conn, "j1")]
        assert "RELEASE_LEFT_SETTLED" in kinds, kinds
        assert _listed(store_url, tmp_path, capsys) == []
    finally:
        _drop_slot(private_postgres)


def test_what_a_release_left_is_shown_masked(store):
    """Its texts are masked with the secrets of the config that left it, as the job's events are."""
    text = 'env { job.mode = "BATCH" }\nsource { Postgres-CDC { password = "Zq-very-secret-77" } }\n'
    run = SimpleNamespace(job_id="j9", run_id="r1", incarnation=1)
    with store.write() as conn:
        record_left_held(conn, run, SimpleNamespace(config=text, variables="{}"), "src1", "Postgres-CDC",
                         HeldPosition("slot_a", 10), "it said Zq-very-secret-77", "drop it (Zq-very-secret-77)")
    with store.read() as conn:
        [shown] = left_behind(conn)
        assert [r.holds for r in conn.execute(select(s.left_held.c.holds)).all()] == ["slot_a"]
    assert "Zq-very-secret-77" not in str(shown) and shown["holds"] == "slot_a", shown
