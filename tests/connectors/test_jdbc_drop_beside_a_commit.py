"""Outside review 8, G, at the statement: a Jdbc DROP_DATA and another writer's batch COMMIT that
lands while it runs.

The destroy asks the store whether rows are kept in the table (store/kept_output.py: marks, and the
note a Jdbc sink writes before its COMMIT, ``SinkCommitLog.applying``). Asked BEFORE the DELETE, a
writer that notes and commits between the answer and the DELETE loses its rows to it (the e2e story
tests/e2e/test_fresh_drop_between_commit_and_mark.py holds that writer between its COMMIT and its
mark). Asked after the DELETE, in its transaction: a commit it took was done before it ended, so
its note is seen (rolled back); a commit after it is not taken (PostgreSQL: the statement's
snapshot; InnoDB: the DELETE's next-key locks make the insert wait).

Here the door's ``decide`` callback is the check (a real note file) and then lets the other writer
(a real second session, on its own thread) note its batch and COMMIT rows: the worst moment for the
destroy, right after its check. Real PostgreSQL and MariaDB.
"""

from __future__ import annotations

import threading
import time

import pytest

from seatide.connectors.jdbc.url import JdbcUrl
from seatide.plugin.base import PermanentError
from seatide.plugin.sink_protocol import open_sink
from tests.connectors.jdbc_sink_helpers import context, db, execute, make_sink, query, table_name  # noqa: F401
from tests.connectors.test_jdbc_sink_privileges import SEATUNNEL_SINK_GRANTS, _mariadb_user


def _other_writer(db_, table: str, note, done: threading.Event, committed: list) -> None:
    """A writer not started over: its note, then its batch's rows in one transaction (which fails
    where the table was dropped meanwhile: then nothing of it was committed, nothing lost)."""
    url, user = db_
    conn = JdbcUrl.parse(url).connect(user)
    try:
        note.write_text("jdbc target")        # SinkCommitLog.applying: before its COMMIT
        conn.cursor().execute(f"INSERT INTO {table} (id) VALUES (100), (101)")
        conn.commit()
        committed.append(True)
    except Exception as exc:       # noqa: BLE001 - the table is gone: its batch fails, to be run again
        committed.append(exc)
    finally:
        conn.close()
        done.set()


def _waits_or_done(db_, table: str, done: threading.Event) -> bool:
    """The other writer committed, or it waits on a lock the destroy holds (InnoDB's gap lock). MariaDB
    10.11 showed the waiting INSERT in no INNODB_TRX row, only as a statement still running (state
    ``Update``) in PROCESSLIST: a two-row INSERT that is still running after a poll is waiting."""
    if done.is_set():
        return True
    if "postgresql" in db_[0]:
        return bool(query(db_, "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"))
    return bool(query(db_, "SELECT 1 FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'") or
                query(db_, "SELECT 1 FROM information_schema.PROCESSLIST WHERE STATE LIKE 'Waiting for table%'") or
                query(db_, f"SELECT 1 FROM information_schema.PROCESSLIST WHERE COMMAND = 'Query' "
                           f"AND INFO LIKE 'INSERT INTO {table} %' AND TIME_MS > 200"))


@pytest.mark.parametrize("mode", [{"data_save_mode": "DROP_DATA"}, {"schema_save_mode": "RECREATE_SCHEMA"}],
                         ids=["drop-data", "recreate-schema"])
def test_a_commit_after_the_destroys_check_is_never_taken_by_its_step(db, tmp_path, mode):
    _commit_right_after_the_check(db, tmp_path, mode)


def _commit_right_after_the_check(db, tmp_path, mode: dict) -> None:
    """The destroy of ``mode`` on a table with rows while another writer notes and commits right after the
    destroy's check."""
    table = table_name()
    execute(db, f"CREATE TABLE {table} (id BIGINT PRIMARY KEY)", f"INSERT INTO {table} (id) VALUES (1), (2)")
    targets = open_sink(make_sink(db, table=table, **mode), context(None, "g8"))
    (key,) = targets.keys()
    target = targets.target(key)
    note, done, committed = tmp_path / "applying-0.json", threading.Event(), []
    writer = threading.Thread(target=_other_writer, args=(db, table, note, done, committed), daemon=True)

    def decide(plan: dict) -> dict:
        kept = note.exists()                  # kept_output: the other writer's note, if written yet
        if not writer.is_alive() and not done.is_set():
            writer.start()                    # it notes and commits right after the check
            deadline = time.monotonic() + 60
            while not _waits_or_done(db, table, done):
                assert time.monotonic() < deadline, "the other writer neither committed nor waited"
                time.sleep(0.05)
        if kept:
            raise PermanentError("rows kept")
        return {"destroy": plan}

    target.save_mode_decisions = (f"P_g8@{table}",)       # a record of its own in the module's database
    target.decide_save_modes = decide
    try:
        target.save_mode_plan(None)
    except PermanentError:
        pass                                   # refused: nothing destroyed
    assert writer.ident is not None, "the destroy never asked whether rows are kept"
    assert done.wait(60), "the other writer never ended"
    if committed == [True]:
        here = "current_schema()" if "postgresql" in db[0] else "DATABASE()"
        there = query(db, f"SELECT 1 FROM information_schema.tables WHERE table_schema = {here} "
                          f"AND table_name = '{table}'")
        ids = [r[0] for r in query(db, f"SELECT id FROM {table} ORDER BY id")] if there else []
        assert [i for i in ids if i >= 100] == [100, 101], f"the {mode} took rows committed after its check: {ids}"
    else:       # its batch failed on the dropped table: nothing of it committed (it runs again)
        assert mode == {"schema_save_mode": "RECREATE_SCHEMA"}, committed


def test_a_custom_sql_that_commits_at_once_never_takes_a_batch_committed_while_it_waits(db, tmp_path):
    """Outside review of G's fix, F1: on MariaDB ``TRUNCATE`` (SeaTunnel's usual ``custom_sql``) commits at
    once. It waited for a writer's open batch (noted, not yet committed), emptied the table right after
    that COMMIT, and the check that then saw the note rolled back nothing: the batch was gone. Run as
    RECREATE_SCHEMA is there (the table locked first, then the check, then the statement), the check
    sees the note and nothing is destroyed."""
    if "postgresql" in db[0]:
        pytest.skip("PostgreSQL runs TRUNCATE in the transaction the check rolls back")
    _destroy_while_a_batch_is_open(db, tmp_path, lambda table: {"data_save_mode": "CUSTOM_PROCESSING",
                                                                "custom_sql": f"TRUNCATE TABLE {table}"})


def test_a_recreate_by_a_user_without_lock_tables_is_refused_and_a_batch_open_beside_it_commits(tmp_path):
    """Outside review F4 and of 4f9f607: SeaTunnel's sink user has no LOCK TABLES. RECREATE_SCHEMA's DROP
    commits at once, so unlocked a batch committed between the check and the DROP was dropped (F4), and
    renaming the table aside instead freed its name for another writer (review of 4f9f607). Now it is
    refused before the check, without waiting for the open batch, which then commits: every row there."""
    from seatide.connectors.jdbc.spec import JdbcSinkError

    with _mariadb_user(SEATUNNEL_SINK_GRANTS, "`DB`.*") as ((url, user), password):
        db, table = (url, "root"), table_name()
        execute(db, f"CREATE TABLE {table} (id BIGINT PRIMARY KEY)", f"INSERT INTO {table} (id) VALUES (1), (2)")
        targets = open_sink(make_sink(db, table=table, schema_save_mode="RECREATE_SCHEMA", user=user,
                                      password=password), context(None, "g8"))
        (key,) = targets.keys()
        target = targets.target(key)
        target.save_mode_decisions = (f"P_g8@{table}",)
        asked: list = []
        target.decide_save_modes = lambda plan: asked.append(plan) or {"destroy": plan}
        writer = JdbcUrl.parse(url).connect("root")
        try:
            writer.cursor().execute(f"INSERT INTO {table} (id) VALUES (100), (101)")    # its batch, open
            with pytest.raises(JdbcSinkError, match="GRANT LOCK TABLES"):
                target.save_mode_plan(None)
            writer.commit()
        finally:
            writer.close()
        assert asked == [] and [r[0] for r in query(db, f"SELECT id FROM {table} ORDER BY id")] == [1, 2, 100, 101]


def _destroy_while_a_batch_is_open(db, tmp_path, mode) -> None:
    """The destroy of ``mode(table)`` starts while another writer's
    batch is open; the batch commits while the destroy waits for it: refused, every row still there."""
    table = table_name()
    execute(db, f"CREATE TABLE {table} (id BIGINT PRIMARY KEY)", f"INSERT INTO {table} (id) VALUES (1), (2)")
    targets = open_sink(make_sink(db, table=table, **mode(table)), context(None, "g8"))
    (key,) = targets.keys()
    target = targets.target(key)
    note = tmp_path / "applying-0.json"
    writer = JdbcUrl.parse(db[0]).connect(db[1])
    note.write_text("jdbc target")             # SinkCommitLog.applying: before its COMMIT
    writer.cursor().execute(f"INSERT INTO {table} (id) VALUES (100), (101)")    # its batch, open

    def decide(plan: dict) -> dict:
        if note.exists():
            raise PermanentError("rows kept")
        return {"destroy": plan}

    target.save_mode_decisions = (f"P_g8@{table}",)
    target.decide_save_modes = decide
    outcome: list = []
    destroyer = threading.Thread(target=lambda: outcome.append(_refused(target)), daemon=True)
    destroyer.start()
    deadline = time.monotonic() + 60
    try:
        while not query(db, "SELECT 1 FROM information_schema.PROCESSLIST WHERE STATE LIKE 'Waiting for table%'"):
            assert time.monotonic() < deadline and destroyer.is_alive(), \
                f"the destroy did not wait for the batch: {outcome}"
            time.sleep(0.05)
        writer.commit()                         # the kept pipeline's batch COMMIT, while the destroy waits
    finally:
        writer.close()                          # a batch left open would hold the database's DROP off
    destroyer.join(60)
    assert outcome == [True], f"the destroy was not refused over the noted batch: {outcome}"
    assert [r[0] for r in query(db, f"SELECT id FROM {table} ORDER BY id")] == [1, 2, 100, 101]


def _refused(target) -> bool:
    try:
        target.save_mode_plan(None)
    except PermanentError:
        return True
    return False
