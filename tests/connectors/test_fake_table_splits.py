"""The one stream of a FakeSource of several tables: admission, descriptors and offsets
(connectors/fake/table_splits.py), without Spark."""

from __future__ import annotations

import time

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from seatide.connectors.fake.layout import SplitLayout
from seatide.connectors.fake.table_splits import FakeTableSplitsReader, batch_units, stream_spec
from seatide.plugin.base import PermanentError

LAYOUTS = [SplitLayout(2, 10, 2, 4), SplitLayout(1, 7, 1, 4), SplitLayout(2, 3, 3, 4)]


def reader(layouts=LAYOUTS, max_rows: int = 8, unbounded: bool = False, intervals=None) -> FakeTableSplitsReader:
    import json

    return FakeTableSplitsReader(json.loads(stream_spec(layouts, intervals or [0] * len(layouts),
                                                        max_rows=max_rows, unbounded=unbounded)))


def batches(stream: FakeTableSplitsReader) -> list[dict[int, list[tuple[int, int]]]]:
    offset, found = stream.initialOffset(), []
    start = None
    while True:
        end = stream.latestOffset(offset, stream.getDefaultReadLimit())
        if end == offset:
            return found
        found.append(batch_units(stream.layouts, start, end))
        start = offset = end


def test_every_row_of_every_table_is_in_exactly_one_batch_and_batches_hold_several_tables():
    found = batches(reader())
    for table, layout in enumerate(LAYOUTS):
        numbers = sorted(n for batch in found for low, high in batch.get(table, []) for n in range(low, high))
        assert numbers == list(range(layout.total_rows)), table
    assert len(found) > 2 and len(found[0]) > 1, found
    for batch in found:                              # within the row bound, but for a batch of one unit
        rows = sum(high - low for ranges in batch.values() for low, high in ranges)
        assert rows <= 8 or sum(len(r) for r in batch.values()) == 1


def test_the_least_advanced_table_goes_first_so_tables_move_on_together():
    layouts = [SplitLayout(1, 40, 10, 4)] * 4
    stream = reader(layouts, max_rows=8)
    first = stream.latestOffset(stream.initialOffset(), ReadMaxRows(8))
    second = stream.latestOffset(first, ReadMaxRows(8))
    assert first["units"] == [1, 1, 0, 0] and second["units"] == [1, 1, 1, 1]
    assert batch_units(layouts, first, second) == {2: [(0, 4)], 3: [(0, 4)]}
    paced = reader(layouts, max_rows=100, unbounded=True, intervals=[60_000] * 4)
    assert paced.latestOffset(paced.initialOffset(), ReadMaxRows(100))["units"] == [1, 1, 1, 1]


def test_a_batch_s_ranges_depend_on_its_offsets_alone():
    stream = reader()
    start = stream.latestOffset(stream.initialOffset(), ReadMaxRows(8))
    end = stream.latestOffset(start, ReadMaxRows(8))
    assert batch_units(LAYOUTS, start, end) == batch_units(reader().layouts, dict(start), dict(end))
    assert stream.latestOffset(end, ReadAllAvailable())["units"] == [lay.unit_count for lay in LAYOUTS]


def test_each_table_is_paced_by_its_own_split_read_interval():
    slow_and_fast = [SplitLayout(1, 100, 100, 1)] * 2
    stream = reader(slow_and_fast, max_rows=1000, unbounded=True, intervals=[60_000, 1])
    first = stream.latestOffset(stream.initialOffset(), ReadMaxRows(1000))
    time.sleep(0.05)
    later = stream.latestOffset(first, ReadMaxRows(1000))
    assert later["units"][0] == 1                     # one split a minute: still its first
    assert later["units"][1] > 10                     # one split a millisecond


def test_a_checkpoint_of_other_tables_or_layouts_is_refused_naming_what_changed():
    offset = reader().initialOffset()
    with pytest.raises(PermanentError, match="written for 3 tables.*now has 2 tables.*--fallback fresh"):
        reader(LAYOUTS[:2]).latestOffset(offset, ReadMaxRows(8))
    changed = [LAYOUTS[0], SplitLayout(1, 8, 1, 4), LAYOUTS[2]]
    with pytest.raises(PermanentError, match="table 1 with split layout 1x7/1/4"):
        reader(changed).latestOffset(offset, ReadMaxRows(8))
