"""One key's changes reach an Iceberg table in source order across every route that writes it
(issue 30, finding 3): shards merged into one table, keys moving between shards inside a batch,
each change numbered by the source across its tables (``__row_seq``), rows arriving in any order."""

from __future__ import annotations

import random

import pytest

from seatide.connectors.iceberg.spec import IcebergSinkError
from seatide.plugin.rowkind import ROW_KIND_COLUMN, ROW_SEQ_COLUMN, RowKind
from tests.connectors.iceberg_helpers import read_back, routed_writer, write_routed

pytestmark = pytest.mark.spark

I, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE
SHARDS = ["shop.orders_0", "shop.orders_1", "shop.orders_2"]
KEYED = {"iceberg.table.primary-keys": "id", "iceberg.table.upsert-mode-enabled": True}
MODES = {"copy-on-write": KEYED,
         "merge-on-read": {**KEYED, "iceberg.table.write-props": {"write.upsert.mode": "merge-on-read"}}}


def generated_changes(seed: int, transactions: int, keys: int):
    """Transactions over sharded tables: inserts, updates in place, deletes, and keys moved to
    another shard (a DELETE in one, an INSERT in the other, in one transaction). Each change is
    (shard, seq, id, name, kind), numbered across the shards in commit order."""
    rng = random.Random(seed)
    where: dict[int, int] = {}          # key -> its shard
    out, seq = [], 0
    for t in range(transactions):
        for _ in range(rng.randint(1, 4)):
            key = rng.randrange(keys)
            name = f"t{t}-{seq}"
            changes = []
            if key not in where:
                where[key] = rng.randrange(len(SHARDS))
                changes = [(where[key], key, name, I)]
            elif (action := rng.random()) < 0.35:
                changes = [(where[key], key, "before", UB), (where[key], key, name, UA)]
            elif action < 0.6:
                changes = [(where.pop(key), key, "gone", D)]
            else:
                old, where[key] = where[key], rng.choice([s for s in range(len(SHARDS)) if s != where[key]])
                changes = [(old, key, "moved", D), (where[key], key, name, I)]
            for shard, key_, value, kind in changes:
                out.append((shard, seq, key_, value, kind))
                seq += 1
    return out


def applied(changes) -> dict[int, str]:
    """The table the changes make, applied one by one in source order."""
    table: dict[int, str] = {}
    for _shard, _seq, key, name, kind in sorted(changes, key=lambda c: c[1]):
        if kind in (I, UA):
            table[key] = name
        else:
            table.pop(key, None)
    return table


def frames(spark, changes, seed: int) -> dict:
    """Each shard's rows of a batch, shuffled over partitions: the order they arrive in says nothing."""
    out = {}
    rng = random.Random(seed)
    for shard in sorted({c[0] for c in changes}):
        rows = [(key, name, int(kind), seq) for s, seq, key, name, kind in changes if s == shard]
        rng.shuffle(rows)
        out[shard] = spark.createDataFrame(
            rows, f"id bigint, name string, {ROW_KIND_COLUMN} tinyint, {ROW_SEQ_COLUMN} bigint").repartition(3)
    return out


@pytest.mark.parametrize("mode", sorted(MODES))
def test_keys_moving_between_shards_land_in_source_order(spark, tmp_path, mode):
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    writer = routed_writer(spark, config, SHARDS, **MODES[mode])
    changes = generated_changes(seed=30, transactions=60, keys=12)
    assert sum(1 for c in changes if c[3] == "moved") >= 5, "the seed moves keys between shards"
    cuts = [0, len(changes) // 3, 2 * len(changes) // 3, len(changes)]
    for batch, (start, end) in enumerate(zip(cuts, cuts[1:])):
        write_routed(writer, tmp_path / "log", frames(spark, changes[start:end], batch), batch)
        assert read_back(spark, config) == sorted(applied(changes[:end]).items()), f"after batch {batch}"


def test_two_routes_giving_one_key_the_same_place_fail_instead_of_picking_one(spark, tmp_path):
    """A source that numbers each table on its own (each from 0) cannot order a key moved between
    them: the batch fails naming the key's changes, rather than keeping either at random."""
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    writer = routed_writer(spark, config, SHARDS[:2], **KEYED)
    changes = [(1, 0, 7, "gone", D), (0, 0, 7, "moved", I), (0, 1, 8, "eight", I)]
    with pytest.raises(IcebergSinkError, match=fr"changes of one key \(id = 7\) share {ROW_SEQ_COLUMN} 0"):
        write_routed(writer, tmp_path / "log", frames(spark, changes, 0), 0)
