"""Outside review of the Jdbc sink, #9: a save-mode step the server refuses because another table
depends on the target (a foreign key on its rows, MariaDB 1451, PostgreSQL 23503; PostgreSQL 2BP01
for RECREATE_SCHEMA's DROP TABLE) fails every attempt alike: it is the job's configuration, named with
the table and what to do, not retried. Real MariaDB (127.0.0.1:3306) and PostgreSQL (127.0.0.1:5432)."""

from __future__ import annotations

import secrets

import pytest

from seatide.connectors.jdbc.spec import JdbcSinkError
from tests.connectors.jdbc_sink_helpers import execute
from tests.connectors.test_jdbc_sink_privileges import _opened_target

SERVERS = {"mariadb": ("jdbc:mariadb://127.0.0.1:3306/test", "root"),
           "postgresql": ("jdbc:postgresql://127.0.0.1:5432/test", "postgres")}


@pytest.fixture
def referenced():
    """(a table another table's rows reference, its server) per server."""
    made = []

    def make(server: str) -> str:
        db, parent = SERVERS[server], f"t_{secrets.token_hex(3)}"
        execute(db, f"CREATE TABLE {parent} (id BIGINT PRIMARY KEY)", f"INSERT INTO {parent} VALUES (1)",
                f"CREATE TABLE {parent}_child (pid BIGINT, FOREIGN KEY (pid) REFERENCES {parent} (id))",
                f"INSERT INTO {parent}_child VALUES (1)")
        made.append((db, parent))
        return parent

    yield make
    for db, parent in made:
        execute(db, f"DROP TABLE IF EXISTS {parent}_child", f"DROP TABLE IF EXISTS {parent}")


@pytest.mark.parametrize("server", list(SERVERS))
def test_drop_data_refused_for_a_foreign_key_names_the_table_and_the_options_that_work(server, referenced):
    parent = referenced(server)
    target = _opened_target(SERVERS[server], "", parent, data_save_mode="DROP_DATA")
    with pytest.raises(JdbcSinkError, match=rf"DROP_DATA on table {parent}: .*no retry.*foreign key.*"
                                            r"CUSTOM_PROCESSING.*APPEND_DATA"):
        target.save_mode_plan(None)


def test_recreate_schema_refused_for_a_dependent_object_is_permanent_on_postgresql(referenced):
    """PostgreSQL refuses DROP TABLE of a table a foreign key references with 2BP01."""
    parent = referenced("postgresql")
    target = _opened_target(SERVERS["postgresql"], "", parent, schema_save_mode="RECREATE_SCHEMA")
    with pytest.raises(JdbcSinkError, match=rf"RECREATE_SCHEMA on table {parent}: .*depend on it.*no retry.*"
                                            r"CREATE_SCHEMA_WHEN_NOT_EXIST"):
        target.save_mode_plan(None)
