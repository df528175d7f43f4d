"""Hive sink: SeaTunnel's ``Hive`` sink options; files published exactly once, partitions registered."""

from __future__ import annotations

from seatide.connectors.hive.options import COMMON, check_common
from seatide.connectors.hive.target import HiveTarget
from seatide.plugin.base import Sink, SinkContext
from seatide.plugin.options import BOOL, STRING, Option, enum
from seatide.plugin.registry import register
from seatide.plugin.sink_protocol import SinkTargets, Target
from seatide.plugin.tables import TableRoute


@register
class HiveSink(Sink):
    """Writes rows into an existing Hive table (text, parquet or orc; partitioned or not).

    Each micro-batch is staged by Spark under the table's hidden ``.seatide-staging``, decided
    in the store and then published as LocalFile publishes (files moved into the partition
    directories); the batch's partitions are then added to the metastore if missing. The
    publish is idempotent, so a replay or a roll-forward adds each file and partition once.
    Tables of a multi-table input routed to one Hive table share it: its save mode is made once,
    at the first batch, rows for it or not (``target.py``).
    """

    plugin_name = "Hive"
    options = (
        *COMMON,
        Option("compress_codec", STRING, "none", "text: gzip, bzip2, deflate, lz4, snappy; parquet: snappy, gzip, "
               "lz4, lz4_raw, zstd; orc: snappy, zlib, lz4, zstd; or none"),
        Option("data_save_mode", enum("APPEND_DATA", "DROP_DATA", "ERROR_WHEN_DATA_EXISTS"), "APPEND_DATA",
               "at the job's first batch: DROP_DATA removes the table's data files (its partitions stay "
               "registered); ERROR_WHEN_DATA_EXISTS fails if it has any; APPEND_DATA adds to them"),
        Option("abort_drop_partition_metadata", BOOL, True,
               "accepted; SeaTide adds a batch's partitions only after the batch is decided, so an aborted batch "
               "has none to drop"),
    )

    def check(self) -> None:
        self.uris = check_common(self)

    def open_targets(self, ctx: SinkContext | None, routes: list[TableRoute], multi: bool) -> SinkTargets:
        return HiveTargets(ctx, routes, multi)


class HiveTargets(SinkTargets):
    """Each route's table is its target (metastore names ignore case); routes naming one share it."""

    def target_key(self, route: TableRoute) -> str:
        return route.sink.opts["table_name"].lower()

    def open_target(self, key: str, routes: list[TableRoute]) -> Target:
        opts = routes[0].sink.opts
        return HiveTarget(key, routes, routes[0].sink.uris, opts["compress_codec"], opts["data_save_mode"],
                          self.ctx.plugin_id if self.ctx is not None else "")


__all__ = ["HiveSink", "HiveTargets"]
