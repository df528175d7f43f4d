"""A Jdbc target's save modes, as the protocol's door (``plugin.save_mode_door.SaveModeDoor``) asks
for them: what they destroy (``plan``), carrying that out (``destroy``), and making the table
usable (``ensure``).

**Once per target.** The door decides once per job run and target table, however many input
tables, sinks or pipelines of the job write it, in a store record fenced by the attempt; whoever
prepares the target later (an attempt that resumes, a zombie, an input table added on resume whose
target its shards already fill: finding 2 of issue 30) carries out that decision, never a new one.

**Carried out once.** A step (DROP_DATA, CUSTOM_PROCESSING, RECREATE_SCHEMA) is not
idempotent: a second DELETE after the first writer committed its rows would delete them; nor is
ERROR_WHEN_DATA_EXISTS's check, which a second writer would fail on the first one's rows. So it
runs under a lock the writers share in the target database (named_lock.py) and is recorded there,
in ``seatide_sink_commits`` under the decision's name (batch -1), in the transaction that runs it,
``fence()`` right before COMMIT: whoever comes second finds the record and destroys nothing
(issue 21, finding 3: a zombie held before this step). The record's name is the one an earlier
SeaTide, which made the save modes itself, gave it (``P_<run>@<target>``): a job it checkpointed,
resumed now, finds it and makes no save mode again.
"""

from __future__ import annotations

import contextlib
from typing import Callable

from seatide import failpoints
from seatide.connectors.jdbc.commit_record import CommitRecords
from seatide.connectors.jdbc.named_lock import named_lock
from seatide.connectors.jdbc.sink_session import lock_wait_s
from seatide.connectors.jdbc.spec import JdbcSinkError
from seatide.connectors.jdbc.step_statement import refused_for_good
from seatide.connectors.jdbc.target import JdbcTarget
from seatide.connectors.jdbc.url import POSTGRESQL

def plan(conn, route: JdbcTarget, names: tuple[str, ...], connected_to: str | None, records_home: str | None,
         sink_id: str, fence: Callable[[], None], decide: Callable[[dict], dict] | None = None) -> dict | None:
    """What ``route``'s target's save modes destroy: ``{"step", "record", "home"}`` (``record``:
    the door's name for the decision, ``names[0]``, which its carrying out is recorded under, in
    ``home``; ``names``: then those of the target's earlier keys), or None. Refuses a table with
    rows under ERROR_WHEN_DATA_EXISTS. A record of the decision in the target database (made by an
    earlier SeaTide, or by another writer of the job) means nothing is left.

    The step is carried out here: a table's rows have no identity a plan could name, so a DELETE
    carried out later would also take the rows another writer added in between. Right after its
    statement, before its COMMIT, under the lock, ``decide`` (the door's: ``Target.decide_save_modes``)
    records it as the target's decision in the store: when another writer of the job decided first
    (an APPEND_DATA that may have committed rows since the door asked) or kept rows refuse it, the
    step is rolled back and the standing decision is followed; a writer that decides after finds
    this one and carries it out, waiting on this lock, before its rows (review 7). After the
    statement, not before it: a batch committed while it ran is seen (``_carry_out``, review 8 G).
    The look, the check, the step and its record are one,
    under the record's lock, whether the table exists or not (review 31 F6): a second writer of
    the job that found no decision in the door, and plans after the first made the table and
    committed rows into it, finds the record, and neither refuses nor empties them. Its record, in
    the transaction that carries it out, makes the door's ``destroy`` of the decided plan find it
    done (as a zombie's, or a crash's next attempt's ``plan`` finds nothing left)."""
    spec, dialect = route.spec, route.dialect
    if spec.schema_save_mode == "RECREATE_SCHEMA":
        step = "RECREATE_SCHEMA"
    elif spec.data_save_mode in ("DROP_DATA", "CUSTOM_PROCESSING", "ERROR_WHEN_DATA_EXISTS"):
        step = spec.data_save_mode
    else:
        return None            # APPEND_DATA: nothing to decide
    cursor = conn.cursor()
    if spec.schema_save_mode == "ERROR_WHEN_SCHEMA_NOT_EXIST" and not dialect.table_exists(cursor, route.table):
        conn.rollback()
        return None            # refused by ``ensure``: no record where the user wants nothing made
    decided = {"step": step, "record": names[0], "home": _home(route)}
    with named_lock(cursor, dialect.name, names[0], lock_wait_s()):
        conn.rollback()        # a snapshot taken before the lock (MySQL) would not see the record
        if made(cursor, route, names, connected_to, records_home):
            conn.rollback()
            return None
        exists = dialect.table_exists(cursor, route.table)
        if exists and step == "ERROR_WHEN_DATA_EXISTS" and _has_rows(cursor, route):
            raise _data_exists(route)
        destroys = exists and step != "ERROR_WHEN_DATA_EXISTS"
        # asked after the step, in its transaction (``_carry_out``): False when another writer's
        # decision stands (the door follows it); raises when rows are kept
        check = (lambda: _stands(decide(decided), decided)) if destroys and decide is not None else None
        if not _carry_out(conn, route, decided, sink_id, fence, destroys, check=check):
            return None
    return decided if destroys else None


def check_ahead(route: JdbcTarget, schema, names: tuple[str, ...], connected_to: str | None,
                records_home: str | None, session: Callable[[], contextlib.AbstractContextManager]) -> None:
    """What ``plan`` and ``ensure`` would refuse, a look that locks, records and changes nothing, asked
    before any target of the job is destroyed (``JdbcTableTarget.check_save_modes``): a table RECREATE_SCHEMA
    makes anew, or CREATE_SCHEMA_WHEN_NOT_EXIST makes where it is missing, whose CREATE TABLE cannot be built
    for ``schema`` (a field with no column type: RECREATE_SCHEMA dropped the table first, outside review of
    e20cc14..8348a57, finding 2); ERROR_WHEN_DATA_EXISTS over a table with rows, unless a record of ``names``
    here says its save modes were made (an earlier SeaTide's, another writer's of the job). ``session``
    opens a connection, only where the server must be asked. A missing table under
    ERROR_WHEN_SCHEMA_NOT_EXIST, and how a table fits, are the routes' own (``JdbcTarget.check_ahead``)."""
    spec, mode = route.spec, route.spec.schema_save_mode
    uncreatable = None
    if schema is not None and mode in ("RECREATE_SCHEMA", "CREATE_SCHEMA_WHEN_NOT_EXIST"):
        try:
            route.create_statement(schema)
        except JdbcSinkError as exc:
            uncreatable = exc
    if uncreatable is not None and mode == "RECREATE_SCHEMA":
        raise uncreatable
    rows_refused = spec.data_save_mode == "ERROR_WHEN_DATA_EXISTS" and mode != "RECREATE_SCHEMA"
    if uncreatable is None and not rows_refused:
        return
    with session() as conn:
        cursor = conn.cursor()
        try:
            exists = route.dialect.table_exists(cursor, route.table)
            if not exists and uncreatable is not None:
                raise uncreatable
            if exists and rows_refused and _has_rows(cursor, route) \
                    and not made(cursor, route, names, connected_to, records_home):
                raise _data_exists(route)
        finally:
            conn.rollback()


def _has_rows(cursor, route: JdbcTarget) -> bool:
    cursor.execute(f"SELECT 1 FROM {route.quoted} LIMIT 1")
    return cursor.fetchone() is not None


def _data_exists(route: JdbcTarget) -> JdbcSinkError:
    return JdbcSinkError(f"Jdbc sink: data_save_mode is ERROR_WHEN_DATA_EXISTS and table {route.label} has rows; "
                         "empty it or choose APPEND_DATA or DROP_DATA")


def destroy(conn, route: JdbcTarget, decided: dict, sink_id: str, fence: Callable[[], None],
            owed: Callable[[Callable[[dict], bool]], bool] | None = None) -> None:
    """Carry out a decided step unless its record says it was (see the module's docstring). Carried out
    late (its record missing: the driver that decided it died first), it would take every row committed
    since: ``owed(carried_out)`` (the door's, ``Target.destroy_owed``) is asked before the step, which
    it skips when a later decision of the target's was carried out (``carried_out``: its record here
    says so) or refuses over kept rows, and again after the step's statement, as a plan's ``check``."""
    cursor = conn.cursor()
    with named_lock(cursor, route.dialect.name, decided["record"], lock_wait_s()):
        conn.rollback()        # a snapshot taken before the lock (MySQL) would not see the record
        _carry_out(conn, route, decided, sink_id, fence, destroys=True, owed=owed)


def _carry_out(conn, route: JdbcTarget, decided: dict, sink_id: str, fence: Callable[[], None],
               destroys: bool, owed: Callable[[Callable[[dict], bool]], bool] | None = None,
               check: Callable[[], bool] | None = None) -> bool:
    """Under the record's lock: unless ``decided``'s record is there, carry out its step (when it
    ``destroys`` and is ``owed()``; else a check that passed, or a step a later one made needless),
    ask ``check`` (False: roll it back, return False), and record it, ``fence()`` right before COMMIT.

    ``check`` (a plan's: the door's decision) asks the store whether rows are kept in the target
    (``store/kept_output.py``) AFTER the step's statement ended, before its COMMIT (outside review 8,
    G): a writer that commits its batch here notes its targets in its checkpoint first
    (``SinkCommitLog.applying``), so any of its rows the statement took were committed before the
    statement ended, and are seen; rows committed later the statement never took: PostgreSQL's
    statement snapshot does not hold them (a row it had to wait on is taken only once that commit is
    done, hence seen), and InnoDB's DELETE locks what it scans, gaps included, so an insert waits for
    this transaction. MariaDB commits DDL at once: a step that does (RECREATE_SCHEMA, a DDL custom_sql:
    ``_commits_at_once``) first locks the table (``LOCK TABLES``: it waits for a writer's open
    transaction, then holds every writer off), before anything is asked, then checks and runs it. A
    user who may not lock is refused there, before anything is checked or destroyed: no fallback runs
    the step unlocked (outside review of 4f9f607: renaming the table aside instead freed its name for
    another writer, whose table then kept the one set aside from being put back)."""
    cursor = conn.cursor()
    records = CommitRecords(route.dialect, decided["home"])
    if decided["home"] is not None:
        route.dialect.create_schema(cursor, decided["home"])
    records.create(cursor)
    conn.commit()
    if records.rows_of(cursor, decided["record"]) is None:
        ddl = destroys and _commits_at_once(route, decided["step"])
        if ddl and not route.dialect.table_exists(cursor, route.table):
            destroys = ddl = False      # carried out late, its table gone since: nothing to lock or destroy
        if ddl:
            _lock_tables(conn, cursor, route, decided["step"], f"{route.quoted} WRITE, {records.table} WRITE")
        try:
            carried_out = lambda plan: _recorded(cursor, records, plan)      # noqa: E731
            step = decided["step"] if destroys and (owed is None or owed(carried_out)) else None
            if owed is not None and step is not None and check is None:
                check = lambda: owed(carried_out)      # noqa: E731 - rows committed since it was asked
            if step is not None and not ddl:
                _run_step(cursor, route, step)
            if check is not None:
                if not check():
                    _undo(conn, cursor, ddl)
                    return False
                failpoints.hit("jdbc.save_mode_decided")     # recorded in the store, not yet committed
            if ddl and step is not None:
                fence()         # a zombie is refused before a step no rollback undoes
                _run_step(cursor, route, step)
            records.insert(cursor, decided["record"], sink_id, -1, 0)
            fence()
        except BaseException:
            _undo(conn, cursor, ddl)
            raise
        conn.commit()
        if ddl:
            cursor.execute("UNLOCK TABLES")
    conn.commit()
    return True


def _stands(decision: dict, decided: dict) -> bool:
    """Whether the door's answer lets this plan's step stand: it is the plan, and no rows are kept in the
    target now (``kept``: another writer's equal decision stands, but not over rows committed since)."""
    return decision.get("destroy") == decided and not decision.get("kept")


def _recorded(cursor, records: CommitRecords, plan: dict) -> bool:
    """Whether another decision's plan of this target (a Jdbc plan names its record) was carried out:
    its record is in this target's records table (another home's is not asked: taken as not)."""
    return (isinstance(plan.get("record"), str) and plan.get("home") == records.schema
            and records.rows_of(cursor, plan["record"]) is not None)


def _run_step(cursor, route: JdbcTarget, step: str) -> None:
    """The step's statement. A refusal no retry passes (a privilege, its syntax, a table LOCK TABLES
    did not lock) is the job's configuration, named as such: retried, it failed every attempt alike,
    the decision recorded (outside review, R-D)."""
    statement = {"RECREATE_SCHEMA": f"DROP TABLE IF EXISTS {route.quoted}", "DROP_DATA": f"DELETE FROM {route.quoted}",
                 "CUSTOM_PROCESSING": route.spec.custom_sql}[step]
    try:
        cursor.execute(statement)
    except Exception as exc:
        fix = refused_for_good(exc)
        if fix is None:
            raise
        said = (str(exc.args[-1]) if exc.args else str(exc)).strip().splitlines()[0]
        raise JdbcSinkError(f"Jdbc sink: {_STEP_OPTION[step]} on table {route.label}: the server refused its statement "
                            f"{statement.strip()!r} ({said}); no retry can pass it: {fix}") from None


_STEP_OPTION = {"RECREATE_SCHEMA": "schema_save_mode RECREATE_SCHEMA", "DROP_DATA": "data_save_mode DROP_DATA",
                "CUSTOM_PROCESSING": "data_save_mode CUSTOM_PROCESSING's custom_sql"}


def _commits_at_once(route: JdbcTarget, step: str | None) -> bool:
    """Whether the step's statement commits itself: DDL on MySQL/MariaDB (a rollback after the check
    would undo nothing), RECREATE_SCHEMA's DROP or a ``custom_sql`` such as SeaTunnel's usual
    ``TRUNCATE TABLE`` (outside review of G's fix, F1: it waited for a writer's open batch and took it
    right after its COMMIT). Such a step runs after the check, the table locked first (``_lock_tables``)."""
    if route.dialect.name == POSTGRESQL or step is None:
        return False
    return step == "RECREATE_SCHEMA" or (step == "CUSTOM_PROCESSING" and route.spec.custom_sql_is_ddl)


def _lock_tables(conn, cursor, route: JdbcTarget, step: str, tables: str) -> None:
    """MySQL/MariaDB: ``LOCK TABLES`` before a step that commits at once. A user who may not is
    refused here, before the check and the step: without the lock a batch committed between the two
    would be taken by it (outside review, F4; SeaTunnel's sink user has no LOCK TABLES)."""
    try:
        cursor.execute(f"LOCK TABLES {tables}")
    except Exception as exc:
        if not exc.args or exc.args[0] not in _DENIED:
            raise
        conn.rollback()
        what, instead = ((f"schema_save_mode RECREATE_SCHEMA on table {route.label}: its DROP TABLE commits at once",
                          "or choose schema_save_mode CREATE_SCHEMA_WHEN_NOT_EXIST with data_save_mode DROP_DATA, "
                          "whose DELETE runs in a transaction") if step == "RECREATE_SCHEMA" else
                         (f"data_save_mode CUSTOM_PROCESSING on table {route.label}: its custom_sql commits at once "
                          "(DDL)", "or use a custom_sql that runs in a transaction (DELETE FROM ... rather than "
                          "TRUNCATE)"))
        raise JdbcSinkError(
            f"Jdbc sink: {what}, so SeaTide locks the table (LOCK TABLES) while it checks that no pipeline keeps "
            f"rows there and runs it, and the user {route.spec.user or ''} lacks the LOCK TABLES privilege "
            f"({exc.args[-1]}). Nothing was checked or destroyed. Grant it (GRANT LOCK TABLES ON <database>.* TO "
            f"<user>), {instead}") from None


_DENIED = (1044, 1142, 1227)        # access denied to the database, to the table, to the command


def _undo(conn, cursor, locked: bool) -> None:
    """Roll the step back (a session the server ended has already) and let writers in again."""
    with contextlib.suppress(Exception):
        conn.rollback()
        if locked:
            cursor.execute("UNLOCK TABLES")


def ensure(conn, route: JdbcTarget, schema, target: str) -> None:
    """Create the table from ``schema`` (the input's fields) when it is missing and the schema save
    mode says so, under a lock named by ``target`` (its target key): two sinks spelling one table
    two ways wait on one lock, so the second finds the table made rather than failing on it
    (review 31 N8); refuse a missing one under ERROR_WHEN_SCHEMA_NOT_EXIST. Whether it fits each
    route is each route's check (target.py)."""
    cursor = conn.cursor()
    spec, dialect, label, table = route.spec, route.dialect, route.label, route.table
    mode = spec.schema_save_mode
    if mode == "ERROR_WHEN_SCHEMA_NOT_EXIST" and not dialect.table_exists(cursor, table):
        raise JdbcSinkError(f"Jdbc sink: schema_save_mode is ERROR_WHEN_SCHEMA_NOT_EXIST and table "
                            f"{label} does not exist; create it or choose CREATE_SCHEMA_WHEN_NOT_EXIST")
    if mode not in ("RECREATE_SCHEMA", "CREATE_SCHEMA_WHEN_NOT_EXIST") or dialect.table_exists(cursor, table):
        conn.rollback()
        return
    with named_lock(cursor, dialect.name, f"create {target}", lock_wait_s()):
        conn.rollback()
        if dialect.table_exists(cursor, table):       # another writer made it while this one waited
            return
        failpoints.hit("jdbc.create_table")          # inside the lock, about to create the table
        ddl = route.create_statement(schema)
        if len(table) > 1:     # as SeaTunnel's save mode, the schema (database) too
            dialect.create_schema(cursor, table[0])
        cursor.execute(ddl)
        conn.commit()


def made(cursor, route: JdbcTarget, names: tuple[str, ...], connected_to: str | None,
         records_home: str | None = None) -> bool:
    """Whether a record of ``names`` (the door's for the target's decision, then those of its
    earlier keys) is in the target database: next to the table, or where an earlier
    SeaTide kept a multi-table sink's records, with its batches' (``records_home``: the
    connection's own database or schema, or on a MySQL URL naming none the database decided
    once for them, review 31 F1)."""
    homes = [_home(route), records_home]
    if route.dialect.name == POSTGRESQL or connected_to:
        homes.append(None)
    for home in dict.fromkeys(homes):
        records = CommitRecords(route.dialect, home)
        where = (home, "seatide_sink_commits") if home else ("seatide_sink_commits",)
        if route.dialect.table_exists(cursor, where) and any(records.rows_of(cursor, n) is not None for n in names):
            return True
    return False


def _home(route: JdbcTarget) -> str | None:
    """Where a target's save-mode record lives: the table's schema (database), else the connection's."""
    return route.table[0] if route.table and len(route.table) > 1 else None


__all__ = ["check_ahead", "destroy", "ensure", "made", "plan"]
