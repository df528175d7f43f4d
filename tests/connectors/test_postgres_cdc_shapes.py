"""Postgres-CDC's column ids (connectors/postgres_cdc/shapes.py) against a real catalog: a Relation
message that stands for two changes with no row between them is told apart by attnum, a catalog
already further on is used only where one change explains the Relation, and otherwise the job
fails naming the table, the columns and the way out. Shapes kept before ids were still load."""

from __future__ import annotations

import json
import secrets

import pytest

from seatide.config.loader import load_job_text
from seatide.connectors.postgres_cdc.tables import TableError
from seatide.plugin.base import ReadContext
from seatide.plugin.evolution import COLUMN_ID, DROP, RENAME, changes_between
from tests.databases.jobs import pg_connect

INT, TEXT = 23, 25


@pytest.fixture
def items():
    table = f"shape_{secrets.token_hex(3)}"
    with pg_connect() as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, name varchar(20), qty int, price int)")
    source = load_job_text(
        'env { job.mode = "STREAMING" }\nsource { Postgres-CDC { base-url = "jdbc:postgresql://127.0.0.1:5432/test", '
        f'username = "postgres", password = "", table-names = ["test.public.{table}"] }} }}\nsink {{ Console {{}} }}'
    ).sources[0].plugin
    yield source, table
    with pg_connect() as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")


def start(source):
    """The shape the job starts with (described now), kept as the runtime keeps it."""
    [table] = source._describe(check_wal=False)
    return table, source._fields(table)


def after(source, table, known, relation: list[list]):
    """The shape the job reads the table with once the stream showed ``relation``."""
    name = f"test.public.{table.name}"
    ctx = ReadContext(None, True, True, 1, 100, 100, "source[0]",
                      known_tables={name: json.dumps(known.jsonValue())}, seen={name: relation})
    [shaped] = source._as_read([table], ctx)
    return source._fields(shaped)


def alter(table: str, *statements: str) -> None:
    with pg_connect() as conn:
        for statement in statements:
            conn.execute(statement.format(t=table))


def test_a_rename_next_to_a_drop_in_one_relation_stays_a_rename(items):
    source, name = items
    table, known = start(source)
    assert [f.metadata[COLUMN_ID] for f in known.fields] == [1, 2, 3, 4]
    alter(name, "ALTER TABLE {t} RENAME COLUMN qty TO quantity", "ALTER TABLE {t} DROP COLUMN name")
    shape = after(source, table, known, [["id", INT, -1], ["quantity", INT, -1], ["price", INT, -1]])
    changes = changes_between(name, known, shape)
    assert [(c.kind, c.column, c.new_name) for c in changes] == [(RENAME, "qty", "quantity"), (DROP, "name", None)]
    retired = {f.name: f.metadata.get(COLUMN_ID) for f in shape.fields if f.metadata.get("seatide.retired")}
    assert retired == {"name": 2, "qty": None}       # rows from before keep their values, not the id


def test_a_catalog_further_on_is_used_only_where_one_change_explains_the_relation(items):
    source, name = items
    table, known = start(source)
    # the Relation shows a column added; the catalog has since dropped another: still one change
    alter(name, "ALTER TABLE {t} ADD COLUMN note text", "ALTER TABLE {t} DROP COLUMN name")
    relation = [["id", INT, -1], ["name", 1043, 24], ["qty", INT, -1], ["price", INT, -1], ["note", TEXT, -1]]
    shape = after(source, table, known, relation)
    assert [f.metadata[COLUMN_ID] for f in shape.fields] == [1, 2, 3, 4, 5]
    # a rename of the last column looks the same as a drop and an add: with the catalog further on, refused
    alter(name, "ALTER TABLE {t} RENAME COLUMN price TO cost", "ALTER TABLE {t} RENAME COLUMN cost TO amount")
    with pytest.raises(TableError) as refused:
        after(source, table, known, [["id", INT, -1], ["name", 1043, 24], ["qty", INT, -1], ["cost", INT, -1]])
    message = str(refused.value)
    assert f"public.{name}" in message and "(id, name, qty, price)" in message and "(id, name, qty, cost)" in message
    assert "start the job over as a new job" in message


def test_two_changes_with_the_catalog_further_on_fail_instead_of_guessing(items):
    source, name = items
    table, known = start(source)
    alter(name, "ALTER TABLE {t} RENAME COLUMN qty TO quantity", "ALTER TABLE {t} DROP COLUMN name",
          "ALTER TABLE {t} RENAME COLUMN quantity TO amount")
    with pytest.raises(TableError, match=r"\(id, quantity, price\).*\(id, amount, price\)"):
        after(source, table, known, [["id", INT, -1], ["quantity", INT, -1], ["price", INT, -1]])


def test_a_shape_kept_before_ids_loads_and_is_compared_by_name(items):
    source, name = items
    table, known = start(source)
    legacy = json.loads(json.dumps(known.jsonValue()))
    for field in legacy["fields"]:                      # as kept before: no id, the column's JSON shorter
        del field["metadata"][COLUMN_ID]
        column = json.loads(field["metadata"]["seatide.postgres_column"])
        field["metadata"]["seatide.postgres_column"] = json.dumps(column[:8])
    from pyspark.sql.types import StructType

    legacy = StructType.fromJson(legacy)
    alter(name, "ALTER TABLE {t} ADD COLUMN note text")
    shape = after(source, table, legacy, [["id", INT, -1], ["name", 1043, 24], ["qty", INT, -1], ["price", INT, -1],
                                          ["note", TEXT, -1]])
    assert [f.metadata[COLUMN_ID] for f in shape.fields] == [1, 2, 3, 4, 5]
    assert [(c.kind, c.column) for c in changes_between(name, legacy, shape)] == [("add column", "note")]
