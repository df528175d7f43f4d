"""The upgrade to revision 0022 on PostgreSQL beside a process of an older SeaTide still running on the store: its
transactions read the lease table the upgrade moves (``leader_lease``), and the tables earlier revisions alter.

The older process is one transaction of its own, on an engine of its own, as its ``/overview`` or ``/metrics``
would read; this version opens the store in a thread meanwhile.
"""

from __future__ import annotations

import logging
import threading

import pytest
from sqlalchemy import create_engine, text

from seatide.store import db
from seatide.store.address import normalize_url
from seatide.store.db import StoreUnavailable, open_store
from seatide.store.migrations import current_revision, head
from seatide.testing.cluster import wait_for
from tests.store.older_lease import lease_as_before

POSTGRESQL = pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)


@POSTGRESQL
def test_an_upgrade_from_before_0021_waits_for_an_older_coordinators_read_of_the_lease(store_url):
    """Outside review of leasemove, L1: a store at 0020 opened by this version while a coordinator of that version
    serves ``/overview`` (one read transaction: the lease, then the nodes). 0021 locked ``nodes`` to add its column,
    then 0022 waited for ``leader_lease``, which the reader held, and the reader then waited for ``nodes``: a cycle,
    "deadlock detected". The upgrade now locks ``leader_lease`` before any revision's step, and only waits."""
    _at_0020(store_url)
    upgraded, ended = _upgrade_beside_an_older_read(      # the older /overview: the lease, then the nodes
        store_url, "SELECT * FROM leader_lease WHERE id = 1", "leader_lease", "SELECT count(*) FROM nodes")
    assert (upgraded, ended) == ({"revision": head()}, None)


@POSTGRESQL
def test_an_upgrade_that_meets_an_older_transaction_in_a_deadlock_is_taken_again(store_url, caplog):
    """The cycle that locking the lease first leaves: a store at 0017 and an older coordinator's ``/metrics`` (its
    store statistics: ``pipelines``, then the lease, in one transaction). The upgrade holds the lease and waits
    for ``pipelines`` (0018 alters it); the reader then waits for the lease. The server ends the upgrade (the
    reader's deadlock check is put off): the migration, all undone, is taken again and the store opens."""
    from alembic import command
    from seatide.store.migrations import _config

    store = open_store(store_url)
    with store.write() as conn:
        command.downgrade(_config(conn), "0017")
    store.dispose()
    with caplog.at_level(logging.WARNING, logger="seatide.store.migrations"):
        upgraded, ended = _upgrade_beside_an_older_read(      # the older /metrics: pipelines, then the lease
            store_url, "SELECT count(*) FROM pipelines", "pipelines", "SELECT * FROM leader_lease WHERE id = 1")
    assert (upgraded, ended) == ({"revision": head()}, None)
    assert "met another transaction in a deadlock" in caplog.text and "taken again (try 2)" in caplog.text, caplog.text


@POSTGRESQL
def test_an_upgrade_that_an_older_transaction_on_the_lease_outwaits_says_to_stop_the_older_process(
        store_url, monkeypatch):
    """Second outside review of leasemove, L1: the upgrade's lock on ``leader_lease`` waits the session's
    ``lock_timeout`` (made short here), and its refusal said another process held the store "over 60 s while
    creating or migrating it". It says what holds it, why it matters and what to do."""
    _at_0020(store_url)
    monkeypatch.setattr(db, "LOCK_TIMEOUT_S", 1.0)
    older = create_engine(normalize_url(store_url))
    try:
        with older.connect() as reader, reader.begin():
            reader.execute(text("SELECT * FROM leader_lease WHERE id = 1")).all()
            with pytest.raises(StoreUnavailable) as refused:
                open_store(store_url)
    finally:
        older.dispose()
    message = str(refused.value)
    assert "over 60 s" not in message and "while creating or migrating it" not in message, message
    assert ("a process of a SeaTide older than this one (before store revision 0022) is using the store's lease "
            "table leader_lease: a transaction of it held the table for over 1 s") in message, message
    assert "Stop every process of the older SeaTide on this store" in message, message
    opened = open_store(store_url)            # once it ended, the upgrade goes through
    with opened.read() as conn:
        assert current_revision(conn) == head()
    opened.dispose()


def _at_0020(url: str) -> None:
    store = open_store(url)
    with store.write() as conn:          # the store as 0020 left it
        conn.execute(text("UPDATE alembic_version SET version_num = '0020'"))
        conn.execute(text("ALTER TABLE nodes DROP COLUMN features"))
        lease_as_before(conn)
    store.dispose()


def _upgrade_beside_an_older_read(url: str, first: str, waited_for: str, then: str) -> tuple[dict, Exception | None]:
    """One read transaction of an older coordinator: ``first``; then this version opens the store in a thread, and
    once its upgrade waits for a lock on ``waited_for``, ``then``. Returns what the opening reached (the revision
    or the error) and the reader's error (None: it read both). The reader's deadlock check is put off (a minute):
    in a cycle the server ends the upgrade, which waited first, and never the reader."""
    older = create_engine(normalize_url(url))
    upgraded: dict[str, object] = {}

    def upgrade():
        try:
            opened = open_store(url)
            with opened.read() as conn:
                upgraded["revision"] = current_revision(conn)
            opened.dispose()
        except Exception as exc:
            upgraded["error"] = exc

    ended = None
    try:
        with older.connect() as reader, reader.begin():
            reader.execute(text("SET LOCAL deadlock_timeout = '60s'"))
            reader.execute(text(first)).all()
            opening = threading.Thread(target=upgrade)
            opening.start()
            wait_for(lambda: _waits_for(older, waited_for), 60, message=f"the upgrade waiting for {waited_for}")
            try:
                reader.execute(text(then)).all()
            except Exception as exc:
                ended = exc
        opening.join(120)
    finally:
        older.dispose()
    return upgraded, ended


def _waits_for(engine, table: str) -> bool:
    """Some session of this database waits for a lock on ``table``."""
    with engine.connect() as conn:
        return conn.execute(text(
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = :table "
            "AND NOT l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"),
            {"table": table}).scalar() > 0


def test_the_upgrade_names_the_lease_holder_it_moved(store_url, caplog):
    """Second outside review of leasemove, L4: the operator learns at the upgrade whose lease was moved and what
    waits for its expiry."""
    store = open_store(store_url)
    with store.write() as conn:
        lease_as_before(conn)
        conn.execute(text("UPDATE leader_lease SET node_id = 'older-c', epoch = 7"))
        conn.execute(text("UPDATE alembic_version SET version_num = '0021'"))
    store.dispose()
    with caplog.at_level(logging.WARNING, logger="seatide.store.migrations"):
        open_store(store_url).dispose()
    assert "revision 0022 moved the leader lease (coordinator older-c, epoch 7, expiring at" in caplog.text, caplog.text
