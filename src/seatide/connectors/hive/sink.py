"""Hive sink: SeaTunnel's ``Hive`` sink options; files published exactly once, partitions registered."""

from __future__ import annotations

from seatide.connectors.hive.options import COMMON, check_common
from seatide.plugin.base import Sink, SinkContext, SinkWriter
from seatide.plugin.options import BOOL, STRING, Option
from seatide.plugin.registry import register


@register
class HiveSink(Sink):
    """Writes rows into an existing Hive table (text, parquet or orc; partitioned or not).

    Each micro-batch is staged by Spark under the table's hidden ``.seatide-staging``, decided
    in the store and then published as LocalFile publishes (files moved into the partition
    directories); the batch's partitions are then added to the metastore if missing. The
    publish is idempotent, so a replay or a roll-forward adds each file and partition once.
    """

    plugin_name = "Hive"
    options = (
        *COMMON,
        Option("compress_codec", STRING, "none", "text: gzip, bzip2, deflate, lz4, snappy; parquet: snappy, gzip, "
               "lz4, lz4_raw, zstd; orc: snappy, zlib, lz4, zstd; or none"),
        Option("abort_drop_partition_metadata", BOOL, True,
               "accepted; SeaTide adds a batch's partitions only after the batch is decided, so an aborted batch "
               "has none to drop"),
    )

    def check(self) -> None:
        self.uris = check_common(self)

    def writer(self, ctx: SinkContext) -> SinkWriter:
        from seatide.connectors.hive.writer import HiveWriter

        return HiveWriter(self.uris, self.opts["table_name"], self.opts["compress_codec"],
                          ctx.plugin_id if ctx is not None else "")
