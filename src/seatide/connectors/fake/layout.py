"""Which global row numbers each reader, split and micro-batch unit covers.

Reader ``k`` of ``P`` owns rows ``[k*R, (k+1)*R)`` (``R`` = rows per reader); its ``S``
splits cut that range evenly. For micro-batches a split may be cut further into *units*
of at most ``unit_rows`` rows, so that one batch stays under the batch row bound; the cut
never changes which row numbers exist, only how they are grouped.

Units are ordered the way parallel readers would progress together: by split index, then
chunk within the split, then reader. An offset is simply how many units were admitted.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import cached_property
from typing import Iterator


@dataclass(frozen=True)
class Unit:
    index: int      # position in the admission order; unique and stable
    reader: int
    split: int      # split index within its reader
    start: int      # first global row number
    stop: int       # one past the last


@dataclass(frozen=True)
class SplitLayout:
    readers: int
    rows_per_reader: int
    splits_per_reader: int
    unit_rows: int

    def __post_init__(self):
        assert self.readers >= 1 and self.rows_per_reader >= 0
        assert self.splits_per_reader >= 1 and self.unit_rows >= 1

    @property
    def total_rows(self) -> int:
        return self.readers * self.rows_per_reader

    @property
    def fingerprint(self) -> str:
        """Recorded in every offset: a checkpoint only makes sense for the same layout."""
        return (f"{self.readers}x{self.rows_per_reader}/{self.splits_per_reader}"
                f"/{self.unit_rows}")

    def split_bounds(self, split: int) -> tuple[int, int]:
        """Row range of split ``split`` within a reader (the same for every reader)."""
        r, s = self.rows_per_reader, self.splits_per_reader
        return split * r // s, (split + 1) * r // s

    def chunks(self, split: int) -> int:
        low, high = self.split_bounds(split)
        return -(-(high - low) // self.unit_rows)

    @cached_property
    def _level_starts(self) -> list[int]:
        """First unit index of each split level; the last entry is the unit count."""
        starts, total = [], 0
        for split in range(self.splits_per_reader):
            starts.append(total)
            total += self.chunks(split) * self.readers
        starts.append(total)
        return starts

    @property
    def unit_count(self) -> int:
        return self._level_starts[-1]

    def units_through_split(self, split: int) -> int:
        """How many units belong to splits ``0..split`` (inclusive)."""
        split = min(split, self.splits_per_reader - 1)
        return self._level_starts[split + 1] if split >= 0 else 0

    def split_of(self, index: int) -> int:
        """The split level unit ``index`` belongs to (``splits_per_reader`` past the end)."""
        return bisect.bisect_right(self._level_starts, index) - 1

    def units(self, begin: int, end: int) -> Iterator[Unit]:
        """Units ``begin..end-1`` in admission order."""
        index = max(begin, 0)
        end = min(end, self.unit_count)
        split = self.split_of(index)
        while index < end:
            while index >= self._level_starts[split + 1]:
                split += 1
            chunks = self.chunks(split)
            within = index - self._level_starts[split]
            chunk, reader = divmod(within, self.readers)
            low, high = self.split_bounds(split)
            n = high - low
            base = reader * self.rows_per_reader + low
            yield Unit(index, reader, split, base + chunk * n // chunks, base + (chunk + 1) * n // chunks)
            index += 1

    def admit(self, begin: int, target: int, max_rows: int | None) -> int:
        """End index of the next batch from ``begin``: whole units, at most ``max_rows`` rows
        (but at least one unit), never past ``target``."""
        target = min(target, self.unit_count)
        if begin >= target or max_rows is None:
            return max(begin, target)
        rows, end = 0, begin
        for unit in self.units(begin, target):
            size = unit.stop - unit.start
            if end > begin and rows + size > max_rows:
                break
            rows += size
            end += 1
        return end
