"""Jdbc source split by a string column, as SeaTunnel splits one (``split.string_split_mode``:
``sample`` or ``charset_based``): the parallel read and the checkpointed read each return every
row once, NULLs, repeated values and quotes included, and a resumed read reads no split twice."""

from __future__ import annotations

import json

import pytest

from seatide.config.job import ConfigError
from seatide.connectors.jdbc.splits import STRING, SplitPlan, charset_cuts
from tests.connectors.test_jdbc_source import (ROWS, all_ids, batch_ctx, execute, jdbc,  # noqa: F401 - table
                                               routed_restart, run_available_now, stream_ctx, table)

# rows the string splits must place too: NULL names, a name many rows share, quotes and a backslash
EXTRA = {ROWS + 1: None, ROWS + 2: None, ROWS + 3: "n150", ROWS + 4: "n150", ROWS + 5: "O'Brien \\ n",
         ROWS + 6: "", ROWS + 7: "~~~"}
EVERY_ID = list(range(1, ROWS + 8))


def add_awkward_names(dialect: str, name: str) -> None:
    values = ", ".join(f"({i}, {'NULL' if v is None else literal(dialect, v)})" for i, v in EXTRA.items())
    execute(dialect, f"INSERT INTO {name} (id, name) VALUES {values}")


def literal(dialect: str, text: str) -> str:
    text = text.replace("'", "''")
    return "'" + (text.replace("\\", "\\\\") if dialect == "mariadb" else text) + "'"


@pytest.mark.parametrize("mode", ["sample", "charset_based"])
def test_parallel_read_splits_by_a_string_column_and_returns_every_row_once(spark, table, mode):
    dialect, name = table
    add_awkward_names(dialect, name)
    source = jdbc(dialect, f'query = "select * from {name}"\npartition_column = "name"\npartition_num = 4\n'
                           f'split.string_split_mode = "{mode}"')
    df = source.read(batch_ctx(spark))
    assert 2 <= df.rdd.getNumPartitions() <= 4
    per_partition = df.rdd.glom().map(len).collect()
    assert max(per_partition) < len(EVERY_ID)            # the rows are spread, not read by one task
    assert sorted(r.id for r in df.collect()) == EVERY_ID


def test_checkpointed_read_by_a_string_column_resumes_without_reading_a_split_twice(spark, table, tmp_path):
    dialect, name = table
    add_awkward_names(dialect, name)
    body = f'table_path = "{name}"\npartition_column = "name"\nsplit.size = 50'
    batches, failed_attempt, resumed = routed_restart(spark, dialect, body, str(tmp_path / "ck"))
    assert min(resumed) == 1 and resumed[1] == failed_attempt        # the failed batch is replayed as it was
    assert all_ids({**batches, **resumed}) == EVERY_ID                # every row once, across the restart
    assert len(batches) + len(resumed) > 2


def test_the_split_reader_reads_string_splits_in_charset_mode(spark, table, tmp_path):
    dialect, name = table
    add_awkward_names(dialect, name)
    source = jdbc(dialect, f'query = "select * from {name}"\npartition_column = "name"\nsplit.size = 40\n'
                           'split.string_split_mode = "charset_based"')
    batches: dict[int, list] = {}
    run_available_now(source.read(stream_ctx(spark, max_rows=80)), str(tmp_path / "ck"), batches)
    assert all_ids(batches) == EVERY_ID
    assert len(batches) > 1


def test_a_collation_given_orders_the_cuts_and_the_predicates_alike(spark, table):
    """Mixed case under a binary collation (uppercase before lowercase): the splits still hold
    every row once, compared in the collation asked for."""
    dialect, name = table
    execute(dialect, f"UPDATE {name} SET name = upper(name) WHERE id % 2 = 0")
    collate = {"postgresql": "C", "mariadb": "utf8mb4_bin"}[dialect]
    for mode in ("sample", "charset_based"):
        source = jdbc(dialect, f'table_path = "{name}"\npartition_column = "name"\npartition_num = 3\n'
                               f'split.string_split_mode = "{mode}"\nsplit.string_split_mode_collate = "{collate}"')
        assert "COLLATE" in source.partitioning.quoted
        assert sorted(r.id for r in source.read(batch_ctx(spark)).collect()) == list(range(1, ROWS + 1))


def test_a_table_keyed_by_a_string_is_split_by_its_key(table):
    dialect, name = table
    keyed = f"{name}_k"
    execute(dialect, f"CREATE TABLE {keyed} (code varchar(10) PRIMARY KEY, n int)")
    try:
        assert jdbc(dialect, f'table_path = "{keyed}"').partition.name == "code"
    finally:
        execute(dialect, f"DROP TABLE {keyed}")


def test_string_plans_cover_every_value_once_and_travel_in_offsets():
    plan = SplitPlan("name", STRING, 0, 0, 3, 30, cuts=("b", "it's"), dialect="mysql")
    assert plan.condition(0, 1, "`name`") == "(`name` < 'b') OR `name` IS NULL"
    assert plan.condition(1, 2, "`name`") == "`name` >= 'b' AND `name` < 'it''s'"
    assert plan.condition(1, 3, "`name`") == "`name` >= 'b'"
    assert plan.condition(0, 3, "`name`") == ""
    assert SplitPlan.from_json(json.loads(json.dumps(plan.to_json()))) == plan
    backslash = SplitPlan("name", STRING, 0, 0, 2, 2, cuts=("a\\b",), dialect="mysql")
    assert backslash.condition(1, 2, "`name`") == "`name` >= 'a\\\\b'"
    assert SplitPlan("name", STRING, 0, 0, 2, 2, cuts=("a\\b",), dialect="postgresql") \
        .condition(1, 2, '"name"') == "\"name\" >= 'a\\b'"
    cuts = charset_cuts("aa", "zz", 5)
    assert len(cuts) == 4 and cuts == sorted(cuts) and all("aa" < c < "zz" for c in cuts)


@pytest.mark.parametrize("body, option, text", [
    ('query = "select 1 as a, \'x\' as s"\npartition_column = s\nsplit.string_split_mode = "random"',
     "split.string_split_mode", "sample or charset_based"),
])
def test_string_split_options_are_checked(body, option, text):
    with pytest.raises(ConfigError) as info:
        jdbc("postgresql", body)
    assert info.value.option == option and text in str(info.value)
