"""Jdbc sink, several input tables into one target (shards merged), on real PostgreSQL and MariaDB:
the target is prepared once however many tables write it, also when one is added on resume, and
one key's changes land in the source's order (``__row_seq``) whichever shard carried them."""

from __future__ import annotations

import pytest

from seatide.plugin.rowkind import ROW_SEQ_COLUMN, RowKind
from seatide.plugin.tables import TableFrames
from seatide.runtime.commit_log import SinkCommitLog, write_exactly_once
from tests.connectors.jdbc_sink_helpers import (  # noqa: F401 - db: the fixture
    db, execute, frame, query, routes_writer, table_name, txn)

pytestmark = pytest.mark.spark


def _batch(writer, log_dir, frames, batch: int, job: str):
    return write_exactly_once(writer, SinkCommitLog(str(log_dir)), frames, batch, txn(job, batch))


def _shard_rows(spark, rows: list[tuple], sequenced: bool = False):
    """A shard's changes: (id, name, kind) or, ``sequenced``, (id, name, kind, __row_seq)."""
    from pyspark.sql import functions as F

    if not sequenced:
        return frame(spark, rows, "id bigint, name string")
    df = frame(spark, [(i, n, seq, kind) for i, n, kind, seq in rows], "id bigint, name string, seq bigint")
    return df.withColumn(ROW_SEQ_COLUMN, F.col("seq")).drop("seq")


def _frames(by_route: dict, collected: bool) -> TableFrames:
    """The batch's tables as the runtime hands them: Spark frames, or rows collected on the driver."""
    schemas = {i: df.schema for i, df in by_route.items()}
    first = next(iter(schemas.values()))
    local = {i: [tuple(r) for r in df.collect()] for i, df in by_route.items()} if collected else None
    return TableFrames(dict(by_route), {}, lambda i: schemas.get(i, first), local=local)


def test_a_shard_added_on_resume_never_empties_the_target_the_others_already_fill(spark, db, tmp_path):
    """Finding 2 of issue 30: shards orders_0 and orders_1 merge into one target with DROP_DATA.
    The job stops, orders_2 is added, the job resumes: the target is prepared once per target,
    under the record that it was, so the rows the first two wrote stay."""
    target, job = table_name(), table_name()
    execute(db, f"CREATE TABLE {target} (id BIGINT PRIMARY KEY, name VARCHAR(20))",
            f"INSERT INTO {target} VALUES (100, 'before the job')")
    options = dict(table=target, primary_keys=["id"], data_save_mode="DROP_DATA")
    first = routes_writer(spark, db, ["orders_0", "orders_1"], job, **options)
    batch0 = {0: _shard_rows(spark, [(1, "a", RowKind.INSERT)]), 1: _shard_rows(spark, [(2, "b", RowKind.INSERT)])}
    _batch(first, tmp_path, _frames(batch0, collected=False), 0, job)
    assert query(db, f"SELECT id FROM {target} ORDER BY id") == [(1,), (2,)]    # emptied once, at the start
    resumed = routes_writer(spark, db, ["orders_0", "orders_1", "orders_2"], job, **options)
    _batch(resumed, tmp_path, _frames({2: _shard_rows(spark, [(3, "c", RowKind.INSERT)])}, collected=False), 1, job)
    assert query(db, f"SELECT id FROM {target} ORDER BY id") == [(1,), (2,), (3,)], \
        "the added shard's save mode emptied a target the others had written"


@pytest.mark.parametrize("collected", [False, True], ids=["spark", "driver"])
def test_one_keys_changes_across_shards_land_in_the_sources_order(spark, db, tmp_path, collected):
    """Finding 3 of issue 30: in one source transaction, DELETE FROM orders_1 WHERE id = 7 then
    INSERT INTO orders_0 (id = 7): the row must exist afterwards; and key 8 the other way round
    (deleted from orders_0, then inserted into orders_1). Whatever order the shards are staged or
    applied in, one of the two keys ends deleted unless the changes are ordered by their
    ``__row_seq``, numbered across the source's tables."""
    target, job = table_name(), table_name()
    execute(db, f"CREATE TABLE {target} (id BIGINT PRIMARY KEY, name VARCHAR(20))",
            f"INSERT INTO {target} VALUES (7, 'seven in orders_1'), (8, 'eight')")
    writer = routes_writer(spark, db, ["orders_0", "orders_1"], job, table=target, primary_keys=["id"])
    shards = {
        0: _shard_rows(spark, [(7, "seven in orders_0", RowKind.INSERT, 11),
                               (8, "eight", RowKind.DELETE, 12)], sequenced=True),
        1: _shard_rows(spark, [(7, "seven in orders_1", RowKind.DELETE, 10),
                               (8, "eight in orders_1", RowKind.INSERT, 13)], sequenced=True),
    }
    result = _batch(writer, tmp_path, _frames(shards, collected), 0, job)
    assert result.state["rows"] == 4
    assert query(db, f"SELECT id, name FROM {target} ORDER BY id") == [(7, "seven in orders_0"),
                                                                       (8, "eight in orders_1")]


def test_shards_writing_one_target_by_different_keys_are_refused_naming_both(spark, db):
    from seatide.connectors.jdbc.spec import JdbcSinkError

    target = table_name()
    with pytest.raises(JdbcSinkError, match=r"orders_0 and src\.orders_1 both write .*same primary_keys"):
        routes_writer(spark, db, ["orders_0", "orders_1"], target, table=target,
                      per_table={"orders_0": {"primary_keys": ["id"]}, "orders_1": {"primary_keys": ["name"]}})


@pytest.mark.parametrize("collected", [False, True], ids=["spark", "driver"])
@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "insert-only"])
def test_a_shard_without_a_column_leaves_it_to_the_targets_default_not_null(spark, db, tmp_path, collected, keyed):
    """Shards evolve one at a time (ALTER TABLE orders_0 ADD COLUMN note ... NOT NULL DEFAULT 'x',
    orders_1 not yet): a row of orders_1 has no note. Staged together, its rows must not write
    NULL there: a new row gets the target's default, an existing one keeps its value."""
    target, job = table_name(), table_name()
    execute(db, f"CREATE TABLE {target} (id BIGINT PRIMARY KEY, name VARCHAR(20), note VARCHAR(20) NOT NULL "
                "DEFAULT 'x')", f"INSERT INTO {target} VALUES (3, 'three', 'kept')")
    options = dict(table=target, primary_keys=["id"]) if keyed else dict(table=target)
    writer = routes_writer(spark, db, ["orders_0", "orders_1"], job, **options)
    noted = frame(spark, [(1, "a", "n1", RowKind.INSERT)], "id bigint, name string, note string")
    bare = [(2, "b", RowKind.INSERT)] + ([(3, "three!", RowKind.UPDATE_AFTER)] if keyed else [])
    _batch(writer, tmp_path, _frames({0: noted, 1: _shard_rows(spark, bare)}, collected), 0, job)
    expected = [(1, "a", "n1"), (2, "b", "x")] + ([(3, "three!", "kept")] if keyed else [(3, "three", "kept")])
    assert query(db, f"SELECT id, name, note FROM {target} ORDER BY id") == expected
