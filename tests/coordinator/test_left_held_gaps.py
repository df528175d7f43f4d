"""What a release left is shown from its event alone, asked only of the source that left it, and dismissable.

Review 2 (of 8b7f5bd..0ad233c): F1, a slot told by a RELEASE_LEFT_HELD event alone (before revision 0017, or by a
leader of the version before during a rolling upgrade) was shown nowhere once views read only ``left_held``; F2,
the leader asked the *current* config's source at the same position whether a slot an earlier config's source
left was still held, and dropped the row as settled when that (other) server had no such slot; F8, nothing but the
leader's look removed a row, and ``seatide list --json`` left them out. Both stores; no source server is asked.
"""
from __future__ import annotations

import json
from types import SimpleNamespace

from sqlalchemy import select, text

from seatide.cli.client import client_command, retained_lines
from seatide.coordinator.left_held_watch import look_at_left_held
from seatide.plugin.contexts import HeldPosition
from seatide.store import schema as s
from seatide.store.db import open_store
from seatide.store.events import record_event
from seatide.store.left_held import UNASKABLE, record_left_held
from seatide.store.views import job_events, job_info, overview
from tests.conftest import store_url  # noqa: F401  (a fixture)
from tests.leader import elected
from tests.store.test_store import store, submit  # noqa: F401  (a fixture)
from tests.store.older_lease import lease_as_before

OLD_SLOT = "old_marked_slot"
CURRENT = """
env { job.mode = "STREAMING" }
source { Postgres-CDC { base-url = "jdbc:postgresql://127.0.0.1:5432/test", username = "postgres", password = "",
  table-names = ["test.public.items"], slot.name = "current_slot" } }
sink { Console {} }
"""


def _told_by_event(conn, job_id: str = "j1") -> None:
    """What a leader of the version before 0017 writes for a slot its release left: the event alone."""
    run = conn.execute(select(s.jobs.c.run_id, s.jobs.c.incarnation).where(s.jobs.c.job_id == job_id)).one()
    record_event(conn, "RELEASE_LEFT_HELD", "coordinator:c0", job_id, run.incarnation, None, level="WARNING",
                 run_id=run.run_id, source="source[0]", connector="Postgres-CDC", holds=OLD_SLOT,
                 retainedBytes=10 << 30, state="extended", lost=False, why="an earlier SeaTide marked it",
                 settle=f"SELECT pg_drop_replication_slot('{OLD_SLOT}')")


def _shown(store, job_id: str = "j1"):
    with store.read() as conn:
        return job_info(conn, job_id)["leftBehind"], overview(conn)["leftBehind"]


def _cli(url: str, tmp_path, capsys, *words, **options) -> tuple[int, str, str]:
    capsys.readouterr()
    args = SimpleNamespace(**{"cluster": None, "store": url, "data_dir": str(tmp_path), "api_token_file": None,
                              "command": words[0], "json": False, **options})
    code = client_command(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_slot_told_before_the_upgrade_is_shown_kept_by_the_leader_and_dismissed_by_the_operator(store_url,
                                                                                                   tmp_path):
    """A store at 0016 whose release left a slot (its event alone): after the upgrade job-info, status's LEFT line
    and the overview show it; the leader's look makes it a row, never settles it (no config says which server to
    ask), and the operator's dismissal ends it, with an event."""
    store = open_store(store_url)
    submit(store, tmp_path, "j1")
    with store.write() as conn:
        conn.execute(text("DROP INDEX ix_events_kind"))
        conn.execute(text("DROP TABLE left_held"))
        conn.execute(text("ALTER TABLE pipelines DROP COLUMN waiting"))        # revision 0018's
        conn.execute(text("ALTER TABLE nodes DROP COLUMN features"))           # revision 0021's
        lease_as_before(conn)                                                  # revision 0022's
        conn.execute(text("UPDATE alembic_version SET version_num = '0016'"))
        _told_by_event(conn)
    store.dispose()
    store = open_store(store_url)
    try:
        mine, cluster = _shown(store)
        assert [(left["holds"], left["error"]) for left in mine] == [(OLD_SLOT, UNASKABLE)], mine
        assert [left["jobId"] for left in cluster] == ["j1"], cluster
        with store.read() as conn:
            assert [line for line in retained_lines(job_info(conn, "j1")) if line.startswith("LEFT")]
        lease = elected(store, "c1")
        assert look_at_left_held(store, lease.epoch, "coordinator:c1", 2.0) == 0
        assert look_at_left_held(store, lease.epoch, "coordinator:c1", 2.0) == 0     # adopted once
        with store.read() as conn:
            [row] = conn.execute(select(s.left_held)).all()
        assert row.config is None and row.holds == OLD_SLOT
        mine, cluster = _shown(store)
        assert len(mine) == len(cluster) == 1 and mine[0]["error"] == UNASKABLE, mine
        from seatide import intents
        assert intents.dismiss_left(store, "j1", OLD_SLOT, actor="test") == 1
        assert _shown(store) == ([], [])
        with store.read() as conn:
            assert "RELEASE_LEFT_DISMISSED" in [e["kind"] for e in job_events(conn, "j1")]
    finally:
        store.dispose()


def test_an_old_leaders_event_during_a_rolling_upgrade_is_shown_once(store, tmp_path):
    """On a store at head, a leader of the version before writes the event alone: shown, once, until dismissed."""
    submit(store, tmp_path, "j1")
    with store.write() as conn:
        _told_by_event(conn)
    mine, cluster = _shown(store)
    assert [left["holds"] for left in mine] == [left["holds"] for left in cluster] == [OLD_SLOT]
    lease = elected(store, "c1")
    look_at_left_held(store, lease.epoch, "coordinator:c1", 2.0)
    mine, cluster = _shown(store)
    assert len(mine) == len(cluster) == 1, (mine, cluster)


def test_a_row_is_never_settled_by_asking_a_source_that_does_not_name_its_slot(store):
    """Review 2 F2: a row whose config's source at its position names another slot (a left-out pipeline's slot
    recorded with the current config, as the release did) was asked of that source, found no slot on that
    server and was dropped as settled. It is kept now, saying why."""
    run = SimpleNamespace(job_id="j1", run_id="r1", incarnation=2)
    with store.write() as conn:
        record_left_held(conn, run, SimpleNamespace(config=CURRENT, variables="{}"), "source[0]", "Postgres-CDC",
                         HeldPosition(OLD_SLOT, 10 << 30, state="extended"), "an earlier SeaTide marked it",
                         f"SELECT pg_drop_replication_slot('{OLD_SLOT}')")
    lease = elected(store, "c1")
    assert look_at_left_held(store, lease.epoch, "coordinator:c1", 2.0) == 0
    with store.read() as conn:
        [left] = overview(conn)["leftBehind"]
    assert left["holds"] == OLD_SLOT and "names no Postgres-CDC source source[0] with slot" in left["error"], left


def test_the_operator_dismisses_a_slot_and_list_shows_what_is_left(store, store_url, tmp_path, capsys):
    """Review 2 F8: ``seatide dismiss-left`` ends a row the leader cannot settle (its server gone), recorded as an
    event; ``seatide list`` shows what is left (``--json`` stays the jobs' array scripts read: review 3, F7);
    dismissing what is not shown is a clear refusal."""
    submit(store, tmp_path, "j1")
    with store.write() as conn:
        _told_by_event(conn)
    code, out, _ = _cli(store_url, tmp_path, capsys, "list", json=True)
    assert code == 0 and [j["jobId"] for j in json.loads(out)] == ["j1"], out
    code, out, _ = _cli(store_url, tmp_path, capsys, "list", json=False)
    assert code == 0 and [line for line in out.splitlines() if line.startswith("LEFT") and OLD_SLOT in line], out
    code, _, err = _cli(store_url, tmp_path, capsys, "dismiss-left", job_id="j1", slot="no_such_slot")
    assert code != 0 and "no release of job j1 left a slot no_such_slot" in err and "Traceback" not in err, err
    code, out, _ = _cli(store_url, tmp_path, capsys, "dismiss-left", job_id="j1", slot=OLD_SLOT)
    assert code == 0 and OLD_SLOT in out, out
    code, out, _ = _cli(store_url, tmp_path, capsys, "list", json=False)
    assert code == 0 and not [line for line in out.splitlines() if line.startswith("LEFT")], out
    with store.read() as conn:
        [dismissed] = [e for e in job_events(conn, "j1") if e["kind"] == "RELEASE_LEFT_DISMISSED"]
    assert dismissed["detail"]["holds"] == OLD_SLOT and dismissed["actor"] == "cli", dismissed


def test_an_event_told_slot_is_shown_masked_with_its_jobs_secrets(store, tmp_path):
    """Review 3, F5: a RELEASE_LEFT_HELD event written unmasked (releases between two versions did) is shown by
    job-info and the overview with the job's secrets masked, as its events are; and so is the row the leader's
    look makes of it (review 4, F1: it copied the texts unmasked, with no config to mask them by later)."""
    password = "s3cret-Pw-1234"
    job = CURRENT.replace('password = ""', f'password = "{password}"')
    submit(store, tmp_path, "j1", text=job)
    with store.write() as conn:
        run = conn.execute(select(s.jobs.c.run_id, s.jobs.c.incarnation)).one()
        record_event(conn, "RELEASE_LEFT_HELD", "coordinator:c0", "j1", run.incarnation, None, level="WARNING",
                     run_id=run.run_id, source="source[0]", connector="Postgres-CDC", holds=OLD_SLOT,
                     retainedBytes=1, state="extended", lost=False, why=f"asked with password {password}: refused",
                     settle=f"psql 'password={password}' -c \"SELECT pg_drop_replication_slot('{OLD_SLOT}')\"")
    for look in (False, True):      # as the event tells it, then as the row the leader's look makes of it
        if look:
            assert look_at_left_held(store, elected(store, "c1").epoch, "coordinator:c1", 2.0) == 0
            with store.read() as conn:
                assert len(conn.execute(select(s.left_held)).all()) == 1
        mine, cluster = _shown(store)
        shown = json.dumps([mine, cluster])
        assert password not in shown and len(mine) == len(cluster) == 1, shown
        assert OLD_SLOT in mine[0]["settle"] and "asked with password" in mine[0]["why"], mine


def test_list_shows_the_jobs_when_the_overview_does_not_answer(capsys):
    """Review 4, F6: ``seatide list`` asked the overview (what releases left) before it printed anything, so a
    coordinator without it (an older version, during an upgrade) left the user with no job list at all. The
    jobs are printed, and the exit says that part is missing (review 5, R3-1), whatever the failure (R3-2)."""
    from seatide.cli.args import CommandRefused
    from seatide.cli.client import _list
    from seatide.cli.http_client import Answered

    class _Older:       # a coordinator of the version before the overview's leftBehind: the jobs, then a 404
        def call(self, method, path, body=None):
            if path == "/jobs":     # older still than the one read of every job (review 7, F2): the two lists
                raise Answered("Not Found", 1, 404)
            if path == "/overview":
                raise CommandRefused("GET /api/v1/overview: 404 Not Found")
            return [{"jobId": "j1", "jobStatus": "RUNNING", "createTime": None, "jobName": "copy"}] \
                if path == "/running-jobs" else []
    class _CutOff(_Older):   # the connection dropped mid-answer (a failover): not an error urllib wraps
        def call(self, method, path, body=None):
            if path == "/overview":
                raise ConnectionResetError("Connection reset by peer")
            return super().call(method, path, body)
    for client in (_Older(), _CutOff()):
        assert _list(client, SimpleNamespace(json=False)) != 0
        out = capsys.readouterr()
        assert "j1" in out.out and "RUNNING" in out.out and "not shown" in out.err, out


def test_an_event_told_slot_of_an_earlier_run_is_masked_with_that_runs_secrets(store, tmp_path):
    """Review 4, F2: masked with the job row's secrets alone, an event of an earlier run of a resubmitted job id
    showed that run's password (the new config has another)."""
    old_password, new_password = "old-Secret-9876", "new-Secret-5432"
    submit(store, tmp_path, "j1", text=CURRENT.replace('password = ""', f'password = "{new_password}"'))
    old_config = CURRENT.replace('password = ""', f'password = "{old_password}"')
    with store.write() as conn:
        conn.execute(s.job_results.insert().values(
            job_id="j1", incarnation=7, run_id="run-before", config=old_config, variables="{}", status="FAILED",
            cleanup="CLEAN", cleanup_due_at=0.0, cleanup_tries=0, next_cleanup_at=0.0, expires_at=0.0,
            created_at=0.0))
        record_event(conn, "RELEASE_LEFT_HELD", "coordinator:c0", "j1", 7, None, level="WARNING",
                     run_id="run-before", source="source[0]", connector="Postgres-CDC", holds=OLD_SLOT,
                     retainedBytes=1, state="extended", lost=False, why=f"asked with password {old_password}",
                     settle=f"SELECT pg_drop_replication_slot('{OLD_SLOT}')")
    mine, cluster = _shown(store)
    shown = json.dumps([mine, cluster])
    assert len(mine) == 1 and old_password not in shown and "asked with password" in shown, shown


def _left_by_a_run_without_an_id(store, tmp_path) -> None:
    """What a release of a result from before revision 0011 (no run id) writes: its row with no run, its event
    with the job's current run (record_event's default)."""
    submit(store, tmp_path, "j1")
    result = SimpleNamespace(job_id="j1", run_id=None, incarnation=1)
    with store.write() as conn:
        record_event(conn, "RELEASE_LEFT_HELD", "coordinator:c0", "j1", 1, None, level="WARNING",
                     run_id=result.run_id, source="source[0]", connector="Postgres-CDC", holds=OLD_SLOT,
                     retainedBytes=1, state="extended", lost=False, why="w", settle="x")
        record_left_held(conn, result, SimpleNamespace(config=CURRENT, variables="{}"), "source[0]", "Postgres-CDC",
                         HeldPosition(OLD_SLOT, 1, state="extended"), "w", "x")


def test_a_row_of_a_run_without_an_id_stands_for_its_event(store, tmp_path):
    """Review 3, F2: a release of a result from before revision 0011 (no run id) wrote its row with none, and its
    event with the job's current run (record_event's default): the slot was shown twice and adopted twice."""
    _left_by_a_run_without_an_id(store, tmp_path)
    mine, cluster = _shown(store)
    assert len(mine) == len(cluster) == 1, cluster
    look_at_left_held(store, elected(store, "c1").epoch, "coordinator:c1", 2.0)
    with store.read() as conn:
        rows = conn.execute(select(s.left_held)).all()
    assert [(row.run_id, row.config is not None) for row in rows] == [(None, True)], rows     # none adopted


def test_a_dismissed_slot_of_a_run_without_an_id_stays_dismissed_after_the_job_id_runs_again(store, tmp_path):
    """Review 4, R2-1: with events matched to rows by run, a dismissal of a run without an id was written under
    the job's then current run; once the id ran again, the release's event was open again, shown and adopted."""
    from seatide.store.left_held import dismiss

    _left_by_a_run_without_an_id(store, tmp_path)
    with store.write() as conn:
        conn.execute(s.jobs.update().values(run_id="run-after-a-resubmission"))
        assert dismiss(conn, "j1", OLD_SLOT, "cli") >= 1
    look_at_left_held(store, elected(store, "c1").epoch, "coordinator:c1", 2.0)
    mine, cluster = _shown(store)
    with store.read() as conn:
        assert mine == cluster == [] and conn.execute(select(s.left_held)).all() == []
