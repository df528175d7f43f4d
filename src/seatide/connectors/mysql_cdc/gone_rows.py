"""After images whose row is gone when read by key: left out, and only where that is sound.

A partial after image (row_images) is completed from the table as it is when its batch is read.
When its key finds no row there, the row was there when the image was logged and a later
transaction removed it. Written with nulls, the image fails a NOT NULL target, or puts values the
row never had into a nullable one until the removal lands. Left out, the target has no row for the
key from here on, as the source has none once the removal is applied. That holds only if the
removal is certain to be applied after the image, so each left-out image is held until one is seen:

* a removal is a DELETE of the key, or an UPDATE moving the key away, of the same table. Shards
  merged into one target share keys, and a key removed from another shard says nothing of this
  one's row (a key moved between shards is a DELETE in one and an INSERT in the other);
* it is in this batch, after the image; or, where the batch ends before it, in the binlog after
  the batch: a transaction's events reach the binlog before its change is visible to other
  sessions, so the binlog holds the removal once the lookup finds the row gone, and the stream
  (which never stops at a position of its own: stop.mode = never) reads it in a later batch. A
  crash between the two batches replays this one from its start: the row is gone again, and its
  removal found again, so the target is never left without the removal for good;
* none found (the row removed without a logged change, sql_log_bin = 0; or a key the lookup did
  not find for another reason): nothing would remove or replace the key's row later, so the batch
  fails, naming the row, instead of writing nulls or losing it silently.

Looking past the batch reads the binlog from the batch's end until the removals of every held key
are seen or the binlog ends; a table whose layout changed on the way (an ALTER TABLE that the rows
cannot be read past by position) ends the look too.
"""

from __future__ import annotations

from typing import Callable, Iterable

from seatide.connectors.cdc_way_out import START_OVER
from seatide.plugin.base import permanent_in_worker


class GoneRows:
    """Keys of after images left out, each held until a later removal of it (same table) is seen."""

    def __init__(self):
        self._held: dict[tuple[str, tuple], tuple] = {}     # (table, key) -> (key columns, binlog position)

    def __bool__(self) -> bool:
        return bool(self._held)

    def holds(self, table: str) -> bool:
        return any(name == table for name, _ in self._held)

    def hold(self, table, key: tuple, here) -> None:
        """An after image of ``table`` (a CapturedTable) at binlog ``here`` whose row was gone."""
        self._held.setdefault((table.name, key), (table.key, str(here)))

    def removed(self, table: str, key: tuple) -> None:
        self._held.pop((table, key), None)

    def confirm(self, later: Callable[[], Iterable[tuple[str, tuple]]]) -> None:
        """At the batch's end: each held key must be removed by a change after it (``later`` gives
        ``(table, key)`` of each removal after the batch, in binlog order); otherwise fail."""
        if not self._held:
            return
        for table, key in later():
            self.removed(table, key)
            if not self._held:
                return
        (table, key), (names, here) = next(iter(self._held.items()))
        shown = ", ".join(f"{name} = {value!r}" for name, value in zip(names, key))
        raise permanent_in_worker(
            f"MySQL-CDC: a binlog row of {table} ({shown}, at binlog {here}) left columns out (the session that "
            "wrote it set binlog_row_image to MINIMAL or NOBLOB), and reading them by key found no row, while no "
            "later change in the binlog removes that key (a DELETE or an UPDATE of its key). The row was removed "
            "without being logged (sql_log_bin = 0), or the table changed its layout before the removal. Written "
            "with nulls, the target would hold values the row never had; left out, it could lack a row the "
            "source has, for good. Set binlog_row_image = FULL for every session that writes the table, "
            f"then {START_OVER}")
