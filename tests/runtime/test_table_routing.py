"""runtime.table_routing: a batch's tables are built as frames only for a sink that reads them."""

from __future__ import annotations

from seatide.runtime.table_routing import _Frames


def test_asking_which_tables_a_batch_has_builds_no_frame():
    """A sink that writes the collected rows (TableFrames.local) checks which tables have rows;
    at 100 tables, building each one's frame to answer cost ≈3 s a batch in Spark's analysis."""
    built = []
    frames = _Frames([3, 7], lambda index: built.append(index) or f"frame {index}")
    assert 3 in frames and 7 in frames and 5 not in frames
    assert sorted(frames) == [3, 7] and len(frames) == 2
    assert built == []
    assert frames[7] == "frame 7" and frames[7] == "frame 7"
    assert built == [7]                     # built once, when read
