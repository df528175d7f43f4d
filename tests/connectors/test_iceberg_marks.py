"""A batch's mark (its transaction id in a snapshot's summary) is how a replay finds that the
catalog committed it; losing it commits the batch twice (docs/connectors/iceberg.md, *Exactly
once*). Each test commits a batch, loses the runtime's record of it (a crash right after the
catalog commit), lets expiry run, and replays the batch."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.connectors.iceberg.catalogs import load_catalog
from seatide.connectors.iceberg.maintenance import expire_snapshots
from seatide.connectors.iceberg.spec import IcebergSinkError
from seatide.plugin.options import OptionError
from seatide.plugin.rowkind import RowKind
from tests.connectors.iceberg_helpers import changes, make_sink, opened, rows_of, table_of, write

pytestmark = pytest.mark.spark


def inserts(spark, ids):
    return changes(spark, [(i, f"n{i}", RowKind.INSERT) for i in ids], "id bigint, name string").coalesce(1)


def another_writer_appends(config, ids) -> None:
    """An engine that is not SeaTide appends a snapshot (no mark in its summary)."""
    table = table_of(config)
    table.append(pa.table({"id": pa.array(ids, pa.int64()), "name": [f"o{i}" for i in ids]},
                          schema=table.schema().as_arrow()))


def test_a_compaction_after_a_batch_carries_its_mark_so_expiry_cannot_lose_it(spark, tmp_path):
    """The sink compacts right after committing batch 1 and dies before the runtime records the
    batch. Another engine appends, then expiry keeps the newest 2 snapshots: the other engine's and
    the compaction's. The replay must find batch 1 through the compaction's snapshot."""
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    options = {"iceberg.maintenance.rewrite-every-commits": 2}
    writer = opened(make_sink(config, **options), spark)
    write(writer, tmp_path / "log", inserts(spark, [0, 1]), 0)
    write(writer, tmp_path / "log", inserts(spark, [2, 3]), 1)
    assert table_of(config).metadata.current_snapshot().summary.operation.value in ("overwrite", "replace")
    os.remove(tmp_path / "log" / "commit" / "1.json")        # committed and compacted, not recorded
    another_writer_appends(config, [100])
    expire_snapshots(load_catalog("default", config), ("ns", "t"), 0, 2)
    replay = write(opened(make_sink(config, **options), spark), tmp_path / "log", inserts(spark, [2, 3]), 1)
    assert replay.replayed
    assert [r[0] for r in rows_of(config, columns=("id",))] == [0, 1, 2, 3, 100]


def test_a_replay_whose_mark_was_expired_fails_instead_of_committing_the_batch_again(spark, tmp_path):
    """Batch 1 is committed, not recorded; another engine then appends three snapshots and expiry
    keeps the newest 2, so snapshots committed since batch 1 was staged are gone (and pyiceberg's
    expiry makes the oldest one kept look like a first snapshot). Whether batch 1 is in the table
    cannot be told: the replay fails, naming the way out, and commits nothing."""
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    writer = opened(make_sink(config), spark)
    write(writer, tmp_path / "log", inserts(spark, [0, 1]), 0)
    write(writer, tmp_path / "log", inserts(spark, [2, 3]), 1)
    os.remove(tmp_path / "log" / "commit" / "1.json")
    for i in (100, 101, 102):
        another_writer_appends(config, [i])
    expire_snapshots(load_catalog("default", config), ("ns", "t"), 0, 2)
    with pytest.raises(IcebergSinkError, match="cannot tell whether batch .* was committed.*retain-last"):
        write(opened(make_sink(config), spark), tmp_path / "log", inserts(spark, [2, 3]), 1)
    assert [r[0] for r in rows_of(config, columns=("id",))] == [0, 1, 2, 3, 100, 101, 102]


def test_retain_last_must_keep_a_batch_and_the_snapshot_after_it(tmp_path):
    text = f"""
env {{ job.mode = BATCH }}
source {{ FakeSource {{ row.num = 1, schema = {{ fields {{ id = bigint }} }} }} }}
sink {{ Iceberg {{ table = t, iceberg.catalog.config = {{ type = hadoop, warehouse = "{tmp_path}" }},
                  iceberg.maintenance.retain-last = 1 }} }}
"""
    with pytest.raises((ConfigError, OptionError), match="iceberg.maintenance.retain-last.* at least 2"):
        load_job_text(text)
