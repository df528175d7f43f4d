"""Schema migrations with Alembic, applied once, by whichever process opens the store first.

The revisions ship inside the package (``seatide/store/alembic/versions``); no
alembic.ini is read at run time. ``migrate`` runs them in one transaction under a lock
(SQLite's write lock, taken by ``BEGIN IMMEDIATE``; a PostgreSQL advisory lock), so two
processes opening a store at once serialize and the second finds it current. A process waits
for another's creation or migration up to ``db.OPEN_WAIT_S``, then fails with a message
saying so; never at once on a lock.

Three kinds of store are opened:

* fresh (no tables): built from the current metadata and stamped at head, Alembic's
  recipe for a new database;
* made by SeaTide before Alembic (a ``schema_version`` table, versions 1 or 2, no
  ``alembic_version``): *adopted*, stamped at the revision matching its version, then
  upgraded;
* already under Alembic: upgraded to head (nothing to do when it is there).

A new revision: ``alembic -c <ini with script_location=src/seatide/store/alembic> revision
-m "what"``, or copy the newest file in ``versions/`` and chain ``down_revision``; add the
same change to ``schema.py`` so fresh stores get it from ``create_all``; set ``HEAD``.

Alembic itself (and Mako, which it imports) is imported only to upgrade an older store: a
store at ``HEAD`` is recognised, and a fresh one built and stamped, with plain SQL. Every
SeaTide process opens the store as it starts (the CLI, coordinators, workers, each driver),
and the import was 0.2 s of CPU of each.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from typing import TYPE_CHECKING

from sqlalchemy import insert, inspect, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError

from seatide import failpoints
from seatide.store import schema as s
from seatide.store.address import OPEN_WAIT_S, redact
from seatide.store.events import record_event

log = logging.getLogger(__name__)

ADVISORY_KEY = 0x5EA71DE
# A migration the server ended to break a lock cycle (an older process's transaction on the tables it changes) is
# taken again this many times in all.
DEADLOCK_TRIES = 5
SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "alembic")
# schema_version (before Alembic) -> the revision that is exactly that schema.
LEGACY_REVISIONS = {1: "0001", 2: "0002"}
# Written to schema_version once Alembic manages a store: a SeaTide from before Alembic
# compares it with its own latest version (2) and refuses the store ("upgrade SeaTide")
# instead of running against a schema it does not know.
ALEMBIC_MANAGED = 3
# The newest revision in versions/ (a test checks it against Alembic's own reading).
HEAD = "0022"
VERSION_TABLE = "alembic_version"

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory


class SchemaTooNew(RuntimeError):
    """The store was migrated by a newer SeaTide than this one."""


def _config(conn: Connection | None = None) -> "Config":
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", SCRIPTS)
    config.attributes["connection"] = conn
    return config


@functools.cache
def _scripts() -> "ScriptDirectory":
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config())


def head() -> str:
    return HEAD


def current_revision(conn: Connection) -> str | None:
    """The store's revision, as Alembic records it (None: not under Alembic)."""
    if not inspect(conn).has_table(VERSION_TABLE):
        return None
    revisions = [r for (r,) in conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}"))]
    if len(revisions) > 1:
        raise RuntimeError(f"the store records {len(revisions)} schema revisions ({', '.join(revisions)}); "
                           "SeaTide keeps one")
    return revisions[0] if revisions else None


def legacy_version(conn: Connection) -> int:
    """The pre-Alembic schema version (0: none recorded)."""
    if not inspect(conn).has_table("schema_version"):
        return 0
    return conn.execute(select(s.schema_version.c.version).order_by(s.schema_version.c.version.desc())
                        ).scalar() or 0


def migrate(store) -> str:
    """Bring the store to head; returns the revision. Cheap when it is already there."""
    with store.read() as conn:          # the common case: no lock, one query
        if current_revision(conn) == head():
            return head()
    failpoints.hit("store.before_migration_lock")
    for tries in range(1, DEADLOCK_TRIES + 1):
        try:
            return _migrate_locked(store)
        except OperationalError as exc:
            if not deadlocked(exc) or tries == DEADLOCK_TRIES:
                raise
            log.warning("migrating the state store %s met another transaction in a deadlock (a process of an older "
                        "SeaTide still running on it?); the server undid the migration, taken again (try %d)",
                        redact(store.url), tries + 1)
    raise AssertionError("unreachable")


def deadlocked(exc: BaseException) -> bool:
    """PostgreSQL ended the transaction to break a lock cycle (SQLSTATE 40P01)."""
    return getattr(getattr(exc, "orig", exc), "sqlstate", None) == "40P01"


def _migrate_locked(store) -> str:
    with store.write() as conn:
        if not store.is_sqlite:
            _take_migration_lock(conn, store.url)
        failpoints.hit("store.migrate")
        before = current_revision(conn)
        if before == head():
            return before                # another process did it while we waited for the lock
        if not store.is_sqlite:
            _lock_the_older_lease(conn)
        _upgrade(conn, before)
    return head()


def _take_migration_lock(conn: Connection, url: str) -> None:
    """PostgreSQL's advisory lock, waited for as long as a store's opening may wait
    (``OPEN_WAIT_S``), not only as long as the session's ``lock_timeout``: another process
    may be migrating a large store."""
    if conn.execute(text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": ADVISORY_KEY}).scalar():
        return
    log.warning("another process is creating or migrating the state store %s: waiting for it, up to %.0f s",
                redact(url), OPEN_WAIT_S)
    conn.execute(text(f"SET LOCAL lock_timeout = {int(OPEN_WAIT_S * 1000)}"))
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": ADVISORY_KEY})


class OlderLeaseInUse(Exception):
    """The upgrade's lock on ``leader_lease`` ran out: an older SeaTide's transaction held the table."""


def _lock_the_older_lease(conn: Connection) -> None:
    """A PostgreSQL store from before revision 0022: its ``leader_lease`` is locked before any revision's step.

    0022 locks it to move it, after the steps before it locked theirs (0021: ``nodes``). A coordinator of the older
    version still running reads the lease, then other tables, in one transaction (its ``/overview``: then
    ``nodes``); between the two lock orders a cycle closed ("deadlock detected", the opening failed). Taken first,
    the upgrade waits for such a reader to end. An older transaction that reads a table an earlier revision alters
    *before* the lease (the store statistics of an older ``/metrics`` read ``pipelines`` first, which 0014, 0015
    and 0018 alter) can still meet the upgrade in a cycle when the store is that far behind: the server ends one
    of the two, and the migration, all undone, is taken again (``migrate``).

    The lock is waited for as long as the session's ``lock_timeout``: only an older SeaTide's process uses the table,
    and its transactions are short; one that outwaits it refuses the opening, saying so (``OlderLeaseInUse``)."""
    if not inspect(conn).has_table("leader_lease"):
        return
    waits = conn.execute(text("SHOW lock_timeout")).scalar()
    try:
        conn.execute(text("LOCK TABLE leader_lease IN ACCESS EXCLUSIVE MODE"))
    except OperationalError as exc:
        if getattr(exc.orig, "sqlstate", None) != "55P03":     # lock_timeout ran out
            raise
        raise OlderLeaseInUse(
            f"a process of a SeaTide older than this one (before store revision 0022) is using the store's lease "
            f"table leader_lease: a transaction of it held the table for over {_seconds(waits)} while this process "
            f"waited to move the lease to its new table (revision 0022), which an older coordinator cannot use, so "
            f"that it never leads again. Nothing was changed. Stop every process of the older SeaTide on this store "
            f"(its `seatide cluster coordinator`s, workers and `seatide run`s; docs/operations.md, Upgrading), then "
            f"start this one again") from None


def _seconds(setting: str) -> str:
    """PostgreSQL's spelling of a duration setting (``10s``, ``1500ms``, ``1min``) as a reader's ``10 s``."""
    for unit, factor in (("ms", 0.001), ("s", 1.0), ("min", 60.0)):
        if setting.endswith(unit) and setting[:-len(unit)].isdigit():
            return f"{int(setting[:-len(unit)]) * factor:g} s"
    return setting


def _upgrade(conn: Connection, before: str | None) -> None:
    legacy = legacy_version(conn) if before is None else None
    if legacy == 0:                     # a new store: today's tables, stamped at HEAD, no Alembic
        _create_fresh(conn)
        _stamp(conn, HEAD)
        origin = None
    else:
        origin = _alembic_upgrade(conn, before, legacy)
    if conn.execute(select(s.schema_version.c.version).where(
            s.schema_version.c.version == ALEMBIC_MANAGED)).first() is None:
        conn.execute(insert(s.schema_version).values(version=ALEMBIC_MANAGED, applied_at=time.time()))
    record_event(conn, "SCHEMA_UPGRADED", "store", origin=origin or "new store", revision=head())


def _alembic_upgrade(conn: Connection, before: str | None, legacy: int | None) -> str | None:
    """An older store (or one from before Alembic) brought to head by the revisions; returns
    where it came from when that was not a revision."""
    from alembic import command

    known = {script.revision for script in _scripts().walk_revisions()}
    if before is not None and before not in known:
        raise SchemaTooNew(f"the store has schema revision {before}, newer than this SeaTide (head {HEAD}); "
                           "upgrade SeaTide")
    config = _config(conn)
    origin = before
    if before is None:
        if legacy not in LEGACY_REVISIONS:
            raise SchemaTooNew(f"the store has schema version {legacy}, newer than this SeaTide; upgrade SeaTide")
        command.stamp(config, LEGACY_REVISIONS[legacy])
        origin = f"schema_version {legacy}"
    command.upgrade(config, "head")
    return origin


def _stamp(conn: Connection, revision: str) -> None:
    """What ``alembic stamp`` does to a store without a version table: the table and its row."""
    conn.execute(text(f"CREATE TABLE {VERSION_TABLE} (version_num VARCHAR(32) NOT NULL, "
                      f"CONSTRAINT {VERSION_TABLE}_pkc PRIMARY KEY (version_num))"))
    conn.execute(text(f"INSERT INTO {VERSION_TABLE} (version_num) VALUES (:revision)"), {"revision": revision})


def _create_fresh(conn: Connection) -> None:
    s.metadata.create_all(conn)
    conn.execute(insert(s.leadership).values(id=1, node_id=None, epoch=0, expires_at=0.0, moved_at_epoch=0))
