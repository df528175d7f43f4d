"""Schema migrations with Alembic, applied once, by whichever process opens the store first.

The revisions ship inside the package (``seatide/store/alembic/versions``); no
alembic.ini is read at run time. ``migrate`` runs them in one transaction under a lock
(SQLite's write lock, taken by ``BEGIN IMMEDIATE``; a PostgreSQL advisory lock), so two
processes opening a store at once serialize and the second finds it current.

Three kinds of store are opened:

* fresh (no tables): built from the current metadata and stamped at head, Alembic's
  recipe for a new database;
* made by SeaTide before Alembic (a ``schema_version`` table, versions 1 or 2, no
  ``alembic_version``): *adopted*, stamped at the revision matching its version, then
  upgraded;
* already under Alembic: upgraded to head (nothing to do when it is there).

A new revision: ``alembic -c <ini with script_location=src/seatide/store/alembic> revision
-m "what"``, or copy the newest file in ``versions/`` and chain ``down_revision``; add the
same change to ``schema.py`` so fresh stores get it from ``create_all``.
"""

from __future__ import annotations

import functools
import os
import time

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import insert, inspect, select, text
from sqlalchemy.engine import Connection

from seatide import failpoints
from seatide.store import schema as s

ADVISORY_KEY = 0x5EA71DE
SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "alembic")
# schema_version (before Alembic) -> the revision that is exactly that schema.
LEGACY_REVISIONS = {1: "0001", 2: "0002"}
# Written to schema_version once Alembic manages a store: a SeaTide from before Alembic
# compares it with its own latest version (2) and refuses the store ("upgrade SeaTide")
# instead of running against a schema it does not know.
ALEMBIC_MANAGED = 3


class SchemaTooNew(RuntimeError):
    """The store was migrated by a newer SeaTide than this one."""


def _config(conn: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", SCRIPTS)
    config.attributes["connection"] = conn
    return config


@functools.cache
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(_config())


def head() -> str:
    return _scripts().get_current_head()


def current_revision(conn: Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


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
    with store.write() as conn:
        if not store.is_sqlite:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": ADVISORY_KEY})
        failpoints.hit("store.migrate")
        before = current_revision(conn)
        if before == head():
            return before                # another process did it while we waited for the lock
        _upgrade(conn, before)
    return head()


def _upgrade(conn: Connection, before: str | None) -> None:
    known = {script.revision for script in _scripts().walk_revisions()}
    if before is not None and before not in known:
        raise SchemaTooNew(f"the store has schema revision {before}, newer than this SeaTide (head {head()}); "
                           "upgrade SeaTide")
    config = _config(conn)
    origin = before
    if before is None:
        legacy = legacy_version(conn)
        if legacy == 0:
            _create_fresh(conn)
            command.stamp(config, "head")
        elif legacy in LEGACY_REVISIONS:
            command.stamp(config, LEGACY_REVISIONS[legacy])
            origin = f"schema_version {legacy}"
        else:
            raise SchemaTooNew(f"the store has schema version {legacy}, newer than this SeaTide; upgrade SeaTide")
    command.upgrade(config, "head")
    if conn.execute(select(s.schema_version.c.version).where(
            s.schema_version.c.version == ALEMBIC_MANAGED)).first() is None:
        conn.execute(insert(s.schema_version).values(version=ALEMBIC_MANAGED, applied_at=time.time()))
    from seatide.store.db import record_event   # db imports this module lazily too

    record_event(conn, "SCHEMA_UPGRADED", "store", origin=origin or "new store", revision=head())


def _create_fresh(conn: Connection) -> None:
    s.metadata.create_all(conn)
    conn.execute(insert(s.leader_lease).values(id=1, node_id=None, epoch=0, expires_at=0.0))
