"""What the two CDC sources share about their table lists."""

from __future__ import annotations

from typing import Iterable


def split_names(entries: Iterable[str]) -> list[str]:
    """``table-names`` as a list of names: SeaTunnel's pages also write several tables in one entry,
    separated by commas (``["db.s.t1,db.s.t2"]``)."""
    return [name.strip() for entry in entries for name in str(entry).split(",") if name.strip()]


__all__ = ["split_names"]
