"""Console sink: prints every row, with its row kind, to the job's output."""

from __future__ import annotations

import base64
import json
import time
from datetime import date, datetime, time as clock
from decimal import Decimal
from typing import Any

from seatide.plugin.base import Batch, Sink, SinkContext
from seatide.plugin.options import BOOL, INT, Option
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ALL_KINDS, ROW_KIND_COLUMN, RowKind, user_columns
from seatide.plugin.sink_protocol import SinkTargets, Target, TargetRows
from seatide.plugin.tables import TableRoute
from seatide.plugin.types import type_name


def format_value(value: Any) -> str:
    """One field as Console shows it: strings quoted, nested values spelled out."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (bytes, bytearray)):
        return "b64:" + base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (datetime, date, clock)):
        return value.isoformat(sep=" ") if isinstance(value, datetime) else value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")
    if hasattr(value, "asDict"):   # a nested row
        return "{" + ", ".join(f"{k}={format_value(v)}" for k, v in value.asDict().items()) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{format_value(k)}: {format_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    return str(value)


def _col(name: str):
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


@register
class ConsoleSink(Sink):
    """Prints each row as ``rowIndex=N kind=+I : field, field, ...`` (SeaTunnel's Console).

    Rows of a micro-batch are streamed to the driver one partition at a time
    (``toLocalIterator``), so a batch never has to fit in the driver's memory at once.
    Printing is not transactional: a batch replayed after a crash may be printed again.
    Row numbers continue across micro-batches and restarts (they are committed state). Each
    table of a multi-table input is a target of its own: its lines name it, numbered apart.
    """

    plugin_name = "Console"
    accepted_row_kinds = ALL_KINDS
    options = (
        Option("log.print.data", BOOL, True, "print the rows (false: only count them)"),
        Option("log.print.delay.ms", INT, 0, "pause after each printed row, in milliseconds"),
        Option("multi_table_sink_replica", INT, 1, "accepted for compatibility; the tables of a multi-table input "
               "are printed one after another, each line naming its table"),
    )

    def check(self) -> None:
        if self.opts["log.print.delay.ms"] < 0:
            raise self.invalid("log.print.delay.ms", "option 'log.print.delay.ms' must be 0 or more milliseconds")

    def open_targets(self, ctx: SinkContext | None, routes: list[TableRoute], multi: bool) -> SinkTargets:
        return ConsoleTargets(ctx, routes, multi)


class ConsoleTargets(SinkTargets):
    decided_in_store = False      # printed as the batch runs: nothing to decide
    keeps_rows = False

    def open_target(self, key: str, routes: list[TableRoute]) -> Target:
        sink = routes[0].sink
        return ConsoleTarget(key, routes, self.ctx.stdout, sink.opts["log.print.data"], sink.opts["log.print.delay.ms"],
                             sink.table_name)


class ConsoleTarget(Target):
    def __init__(self, key: str, routes: list[TableRoute], stdout, print_data: bool, delay_ms: int,
                 table: str | None = None):
        super().__init__(key, routes)
        self.stdout = stdout
        self.print_data = print_data
        self.delay_s = delay_ms / 1000
        self.table = table           # one table of several: its lines name it
        self._announced = False

    def apply(self, rows: TargetRows, batch: Batch) -> dict:
        first = int(batch.previous_state.get("total_rows", 0)) + 1
        count = 0
        for part in rows.parts:
            count += self._print(part.frame, first + count) if self.print_data else part.frame.count()
        return {"rows": count, "total_rows": first - 1 + count}

    def _print(self, df, first: int) -> int:
        out = self.stdout
        columns = user_columns(df.columns)
        if not self._announced:
            types = {f.name: f.dataType for f in df.schema.fields}
            table = f"table {self.table} " if self.table else ""
            out.write(f"{table}output rowType: " + ", ".join(f"{c}<{type_name(types[c])}>" for c in columns) + "\n")
            self._announced = True
        has_kind = ROW_KIND_COLUMN in df.columns
        count = 0
        shown = df.select(*[_col(c) for c in columns], *([_col(ROW_KIND_COLUMN)] if has_kind else []))
        for row in shown.toLocalIterator():
            kind = RowKind(row[ROW_KIND_COLUMN]) if has_kind else RowKind.INSERT
            fields = ", ".join(format_value(row[i]) for i in range(len(columns)))
            table = f"table={self.table} " if self.table else ""
            out.write(f"{table}rowIndex={first + count} kind={kind.short} : {fields}\n")
            count += 1
            if self.delay_s:
                out.flush()
                time.sleep(self.delay_s)
        out.flush()
        return count


__all__ = ["ConsoleSink", "ConsoleTarget", "ConsoleTargets", "format_value"]
