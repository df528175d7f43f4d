"""Redis sink: SeaTunnel's ``Redis`` sink options; each micro-batch written once, in one transaction."""

from __future__ import annotations

from seatide.connectors.redis.options import SINK, check_connection
from seatide.connectors.redis.target import RedisTarget
from seatide.plugin.base import Sink, SinkContext
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ALL_KINDS
from seatide.plugin.sink_protocol import SinkTargets, Target
from seatide.plugin.tables import TableRoute


@register
class RedisSink(Sink):
    """Writes each row to Redis as its ``data_type`` says (``commands``): a key, a hash's fields,
    or a member of a list, set or sorted set. Deletes and the old side of an update remove what
    the row wrote. Every table of a multi-table input writing one server shares one transaction a
    batch, its rows in the order they changed."""

    plugin_name = "Redis"
    options = SINK
    accepted_row_kinds = ALL_KINDS

    def check(self) -> None:
        check_connection(self)
        if self.opts["expire"] == 0 or self.opts["expire"] < -1:
            raise self.invalid("expire", f"option 'expire' must be seconds (1 or more), or -1 for keys that never "
                                         f"expire; got {self.opts['expire']}")
        if not self.opts["key"].strip():
            raise self.invalid("key", "option 'key' must name a field of the input, or be the key itself")

    @property
    def keeps_last_change_per_key(self) -> bool:
        return True         # a change stream's __row_seq orders the batch's commands across tables

    def open_targets(self, ctx: SinkContext | None, routes: list[TableRoute], multi: bool) -> SinkTargets:
        return RedisTargets(ctx, routes, multi)


class RedisTargets(SinkTargets):
    """One server's database is one target: every route writing it is applied in one transaction."""

    decided_in_store = False        # the batch and its record commit in Redis, in one MULTI/EXEC

    def target_key(self, route: TableRoute) -> str:
        opts = route.sink.opts
        return f"redis://{opts['host']}:{opts['port']}/{opts['db_num']}"

    def open_target(self, key: str, routes: list[TableRoute]) -> Target:
        return RedisTarget(key, routes)


__all__ = ["RedisSink", "RedisTargets"]
