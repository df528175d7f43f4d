"""Outside review, finding 8: an Iceberg check ahead (``IcebergTarget.check_save_modes`` through
``SaveModeDoor.check_ahead``) is a look, but a SQL catalog's was not: pyiceberg's ``SqlCatalog``
creates its catalog tables (``iceberg_tables``, ``iceberg_namespace_properties``) when it is made, and
SQLite the database's file when it is connected to. A job refused ahead, or one whose sink never wrote,
left them in the user's database. Now a catalog without its tables is looked at as one holding no table.

Real SQLite files and a real PostgreSQL database of the test's own; no Spark (the check ahead is the
target's own code)."""

from __future__ import annotations

import hashlib
import os
import secrets

import pyarrow as pa
import pytest
from sqlalchemy import create_engine, inspect, text

from seatide.connectors.iceberg.catalogs import load_catalog
from seatide.connectors.iceberg.spec import IcebergSinkError
from seatide.plugin.save_mode_door import SaveModeDoor
from seatide.plugin.sink_protocol import open_sink
from seatide.runtime.commit_log import FileDecisions, SinkCommitLog
from tests.connectors.iceberg_helpers import PG_ADMIN, context, make_sink


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_catalog(request, tmp_path):
    """(a jdbc catalog config whose database has no catalog tables yet, the names of the database's tables)"""
    warehouse = f"file://{tmp_path}/warehouse"
    if request.param == "sqlite":
        path = tmp_path / "catalog.db"
        yield ({"type": "jdbc", "uri": f"jdbc:sqlite:{path}", "warehouse": warehouse},
               lambda: _sqlite_tables(path))
        return
    name = f"iceberg_{secrets.token_hex(4)}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    engine = create_engine(f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}")
    try:
        yield ({"type": "jdbc", "uri": f"jdbc:postgresql://127.0.0.1:5432/{name}", "jdbc.user": "postgres",
                "warehouse": warehouse}, lambda: sorted(inspect(engine).get_table_names()))
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


def _sqlite_tables(path) -> list[str] | None:
    """The tables of the SQLite file ``path``; None: no file (opening it would make one)."""
    if not os.path.exists(path):
        return None
    engine = create_engine(f"sqlite:///file:{path}?mode=ro&uri=true")
    try:
        return sorted(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _check_ahead(config: dict, tmp_path, **modes) -> None:
    """The door's check ahead of the sink's one target (table ns.t), no decision of its save modes standing."""
    sink = make_sink(config, **modes)
    sink.check()
    targets = open_sink(sink, context(None))
    door = SaveModeDoor(FileDecisions(SinkCommitLog(str(tmp_path / "log"))), "L")
    door.check_ahead(targets.target(targets.keys()[0]), None)


def test_a_check_ahead_makes_no_catalog_tables(sql_catalog, tmp_path):
    """A missing catalog holds no table: refused under ERROR_WHEN_SCHEMA_NOT_EXIST, passed under
    CREATE_SCHEMA_WHEN_NOT_EXIST with ERROR_WHEN_DATA_EXISTS; the database is left as it was."""
    config, tables = sql_catalog
    before = tables()
    with pytest.raises(IcebergSinkError, match="ns.t does not exist"):
        _check_ahead(config, tmp_path, schema_save_mode="ERROR_WHEN_SCHEMA_NOT_EXIST")
    _check_ahead(config, tmp_path, data_save_mode="ERROR_WHEN_DATA_EXISTS")
    assert tables() == before, "a check ahead made the catalog's tables"
    assert not os.path.exists(tmp_path / "warehouse")


def _digest(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _catalog_with_two_rows(config: dict) -> None:
    """The catalog of ``config`` with its tables and ns.t holding two rows."""
    catalog = load_catalog("default", config)     # the sink's catalog_name by default
    catalog.create_namespace("ns")
    rows = pa.table({"id": pa.array([1, 2], pa.int64())})
    catalog.create_table(("ns", "t"), rows.schema).append(rows)
    catalog.engine.dispose()


def test_a_check_ahead_reads_a_sql_catalogs_table_and_changes_nothing(tmp_path):
    """A catalog with its tables: ns.t's rows refuse ERROR_WHEN_DATA_EXISTS, a missing ns.u refuses
    ERROR_WHEN_SCHEMA_NOT_EXIST, and the catalog's file is byte for byte as it was."""
    path = tmp_path / "catalog.db"
    config = {"type": "jdbc", "uri": f"jdbc:sqlite:{path}", "warehouse": f"file://{tmp_path}/warehouse"}
    _catalog_with_two_rows(config)
    before = _digest(path)
    with pytest.raises(IcebergSinkError, match="holds 2 rows"):
        _check_ahead(config, tmp_path, data_save_mode="ERROR_WHEN_DATA_EXISTS")
    with pytest.raises(IcebergSinkError, match="ns.u does not exist"):
        _check_ahead(config, tmp_path, table="u", schema_save_mode="ERROR_WHEN_SCHEMA_NOT_EXIST")
    assert _digest(path) == before


@pytest.mark.parametrize("query", ["uri=true", "mode=rwc&uri=true"])
def test_a_check_ahead_opens_a_sqlite_uri_read_only_too(tmp_path, query):
    """Outside review F6: a catalog URL already in SQLite's ``file:`` form was passed on as it was (its own mode,
    or none: read-write-create), so the look made the database's file. Now it is opened read-only like a path:
    no file, no catalog (and none made); a catalog there is read, its file byte for byte as it was."""
    path = tmp_path / "catalog.db"
    config = {"type": "sql", "uri": f"sqlite:///file:{path}?{query}", "warehouse": f"file://{tmp_path}/warehouse"}
    with pytest.raises(IcebergSinkError, match="ns.t does not exist"):
        _check_ahead(config, tmp_path, schema_save_mode="ERROR_WHEN_SCHEMA_NOT_EXIST")
    assert not os.path.exists(path), "a check ahead made the catalog's SQLite file"
    _catalog_with_two_rows({**config, "uri": f"sqlite:///{path}"})
    before = _digest(path)
    with pytest.raises(IcebergSinkError, match="holds 2 rows"):
        _check_ahead(config, tmp_path, data_save_mode="ERROR_WHEN_DATA_EXISTS")
    assert _digest(path) == before
