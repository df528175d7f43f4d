"""Http sink: SeaTunnel's ``Http`` sink options; each row POSTed to the endpoint as a JSON object.

At least once, not exactly once: an arbitrary endpoint keeps no record SeaTide could check or
write in one transaction with the rows, so a batch replayed after a crash (sent, but not yet in
the commit log) is sent again. Each row carries ``Idempotency-Key: <batch transaction id>-<row
number in the batch>``, the same on every replay of the batch (its rows come again in the same
order), so an endpoint that honours the header keeps each row once.
"""

from __future__ import annotations

from seatide import failpoints
from seatide.connectors.http.client import Endpoint
from seatide.connectors.http.options import SINK, check_request
from seatide.connectors.json_rows import rows_as_json
from seatide.plugin.base import Batch, Sink, SinkContext
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ROW_SEQ_COLUMN
from seatide.plugin.sink_protocol import SinkTargets, Target, TargetRows
from seatide.plugin.tables import TableRoute

IDEMPOTENCY_HEADER = "Idempotency-Key"


@register
class HttpSink(Sink):
    """Sends each row (inserts: SeaTunnel's Http sink is a web hook of new rows) as the body of a
    POST, ``Content-Type: application/json``, with ``headers``; retries as the source does."""

    plugin_name = "Http"
    options = SINK

    def check(self) -> None:
        check_request(self)

    def open_targets(self, ctx: SinkContext | None, routes: list[TableRoute], multi: bool) -> SinkTargets:
        return HttpTargets(ctx, routes, multi)


class HttpTargets(SinkTargets):
    decided_in_store = False        # sent as the batch runs: the endpoint has no commit to decide

    def target_key(self, route: TableRoute) -> str:
        return route.sink.opts["url"]

    def open_target(self, key: str, routes: list[TableRoute]) -> Target:
        return HttpTarget(key, routes)


class HttpTarget(Target):
    def __init__(self, key: str, routes: list[TableRoute]):
        super().__init__(key, routes)
        self.opts = routes[0].sink.opts
        self._endpoint: Endpoint | None = None

    def apply(self, rows: TargetRows, batch: Batch) -> dict:
        from pyspark.sql import functions as F

        if self._endpoint is None:
            self._endpoint = Endpoint(self.opts, "Http sink")
        batch.fence()       # a driver the job has replaced sends nothing more
        frames = [rows_as_json(part.frame, "", i) for i, part in enumerate(rows.parts)]
        sent = 0
        for part, df in zip(rows.parts, frames):
            # A change stream's rows go in the order they changed: the same order on every replay.
            ordered = df.orderBy(F.col("seq")) if ROW_SEQ_COLUMN in part.frame.columns else df
            for row in ordered.select("value").toLocalIterator():
                self._endpoint.send("POST", self.opts["url"], body=row["value"].encode("utf-8"),
                                    headers={IDEMPOTENCY_HEADER: f"{batch.transaction_id}-{sent}"})
                sent += 1
        failpoints.hit("http.sent")         # sent; the commit log not yet
        total = int(batch.previous_state.get("total_rows", 0))
        return {"rows": sent, "total_rows": total + sent}

    def end_of_data(self, state: dict) -> None:
        if self._endpoint is not None:
            self._endpoint.close()
            self._endpoint = None


__all__ = ["HttpSink", "HttpTargets", "IDEMPOTENCY_HEADER"]
