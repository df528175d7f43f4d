"""A sink's option written as a dotted key without quotes is a nested object to HOCON
(``paimon.table.primary-keys = "name"`` reads as ``paimon { table { primary-keys = ... } }``). The
defaults a sink takes from its input's table must see it all the same: the user's key was
replaced by the input's primary key without a word."""

from __future__ import annotations

import pytest

from seatide.config.loader import load_job_text

SOURCE = """source { FakeSource { row.num = 1, schema = { fields { id = bigint, name = string }
                                                  primaryKey { name = pk, columnNames = [id] } } } }
"""


@pytest.mark.parametrize("written", ['paimon.table.primary-keys = "name"', '"paimon.table.primary-keys" = "name"'],
                         ids=["unquoted", "quoted"])
def test_a_paimon_key_written_as_a_dotted_key_is_the_users_not_the_inputs(written, tmp_path):
    job = load_job_text(SOURCE + f'sink {{ Paimon {{ warehouse = "{tmp_path}", database = d, table = t, {written} }} }}')
    assert job.sinks[0].plugin.primary_keys == ["name"]


def test_an_iceberg_key_written_as_a_dotted_key_is_the_users_on_a_multi_table_input(tmp_path):
    tables = """source { FakeSource { tables_configs = [
      { schema = { table = "db.a", fields { id = bigint, name = string }, primaryKey { name = pk, columnNames = [id] } } },
      { schema = { table = "db.b", fields { id = bigint, name = string }, primaryKey { name = pk, columnNames = [id] } } }
    ] } }
"""
    catalog = (f'iceberg.catalog.config = {{ type = jdbc, uri = "jdbc:sqlite:{tmp_path}/c.db", '
               f'warehouse = "file://{tmp_path}" }}')
    job = load_job_text(tables + f'sink {{ Iceberg {{ {catalog}, namespace = db, table = "${{table_name}}", '
                                 'iceberg.table.primary-keys = "name" } }')
    for route in job.sinks[0].plugin.routes:
        assert route.sink.opts["iceberg.table.primary-keys"] == "name"
