"""The checkpointed read of several Jdbc tables: a stream of split descriptors, rows read by Spark.

Offsets are ``{"plans": [SplitPlan, ...], "next": [table, split]}``: every table's plan is
measured (min, max, count of its partition column) the first time the stream starts, and then
travels inside every offset Spark logs, so a resumed stream replays and continues with the same
split bounds. A micro-batch admits whole splits, table after table, as many as fit its row limit
(at least one).

A batch's split descriptors, a handful per batch: (table, the SQL predicate of a run of its
splits), a table's admitted splits cut into one contiguous run per task slot, are a pure
function of the batch's two offsets (``batch_descriptors``). The driver derives them from the
offsets Spark logged for the batch, without reading the stream's own rows (they are the same
descriptors, but reading them is a Spark job through a Python worker, 0.35-0.9 s a batch). The
rows themselves are read when the batch is written, by Spark's own JDBC reader, one partition
per descriptor (``JdbcSource.batch_rows``): the JVM reads and converts every value, no row
passes through Python.
"""

from __future__ import annotations

import json
from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from seatide.connectors.jdbc.splits import SplitPlan

SOURCE_NAME = "seatide_jdbc_table_plans"
DESCRIPTORS = "table int, predicate string"


class Descriptors(InputPartition):
    def __init__(self, splits: list[tuple[int, str]]):
        super().__init__(len(splits))
        self.splits = splits


class JdbcTablePlans(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return DESCRIPTORS

    def streamReader(self, schema) -> "JdbcTablePlansReader":
        return JdbcTablePlansReader(json.loads(self.options["spec"]))


class JdbcTablePlansReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, spec: dict):
        # {"url", "user", "password", "max_rows", "tasks",
        #  "tables": [{"plan_sql", "column", "quoted_column", "kind", "split_size", "partition_num",
        #              "dialect", "strings"}],
        #  "plans": [SplitPlan JSON, ...] when the driver measured the tables for a fresh stream}
        self.spec = spec
        self._plans: list[SplitPlan] | None = None

    def initialOffset(self) -> dict:
        if self._plans is None and "plans" in self.spec:        # measured by the driver (JdbcSource._planned)
            self._plans = [SplitPlan.from_json(p) for p in self.spec["plans"]]
        if self._plans is None:
            self._plans = [self._measure(table) for table in self.spec["tables"]]
        return {"plans": [p.to_json() for p in self._plans], "next": [0, 0]}

    def _measure(self, table: dict) -> SplitPlan:
        from seatide.connectors.jdbc.split_measure import measure
        from seatide.connectors.jdbc.url import JdbcUrl

        with JdbcUrl.parse(self.spec["url"]).connect(self.spec["user"], self.spec["password"], autocommit=True) as conn:
            return measure(conn, {"dialect": "", "strings": None, **table})

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.spec["max_rows"])

    def prepareForTriggerAvailableNow(self) -> None:
        """Nothing to pin: the plans in the offsets already bound the stream."""

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        budget = None if isinstance(limit, ReadAllAvailable) else (
            limit.max_rows if isinstance(limit, ReadMaxRows) else self.spec["max_rows"])
        return admitted_through(_current(start), budget)

    def partitions(self, start: dict, end: dict) -> list[Descriptors]:
        runs = batch_descriptors(start, end, [t["quoted_column"] for t in self.spec["tables"]], self.spec["tasks"])
        return [Descriptors(runs)] if runs else []

    def commit(self, end: dict) -> None:
        """Nothing buffered: a split's rows are read when its batch is written."""

    def read(self, partition: Descriptors) -> Iterator[tuple]:
        yield from partition.splits


def admitted_through(start: dict, budget: int | None) -> dict:
    """The offset a batch from ``start`` reads up to: whole splits, table after table, as many as
    hold ``budget`` rows (all of them without one), and at least one."""
    plans = [SplitPlan.from_json(p) for p in start["plans"]]
    table, split = start["next"]
    admitted = 0
    while table < len(plans):
        plan = plans[table]
        if split >= plan.count:
            table, split = table + 1, 0
            continue
        if budget is None:
            split = plan.count
            continue
        if admitted and plan.rows_between(split, split + 1) > budget - admitted:
            break
        stop = plan.splits_within(split, budget - admitted)
        admitted += plan.rows_between(split, stop)
        split = stop
        if split < plan.count:           # the budget ends inside this table
            break
    return {"plans": start["plans"], "next": [table, split]}


def batch_descriptors(start: dict | None, end: dict, quoted_columns: list[str | None],
                      tasks: int) -> list[tuple[int, str]]:
    """The split descriptors of the batch from ``start`` to ``end`` (``start`` None: the stream's
    initial offset): (table, the SQL predicate of a run of its splits), a table's splits in the
    batch cut into one contiguous run per task slot. A pure function of the two offsets, so the
    driver derives a batch's descriptors from the offsets Spark logged for it, and a replayed
    batch gets the same ones."""
    end = _current(end)
    start = _current(start) if start is not None else {"plans": end["plans"], "next": [0, 0]}
    plans = [SplitPlan.from_json(p) for p in end["plans"]]
    (table, split), (last_table, last_split) = start["next"], end["next"]
    runs = []
    while (table, split) < (last_table, last_split) and table < len(plans):
        stop = plans[table].count if table < last_table else last_split
        count = stop - split
        if count > 0:
            # a task per split would pay Spark's and the database's per-task cost for each
            runs_here = min(count, tasks)
            bounds = [split + i * count // runs_here for i in range(runs_here + 1)]
            column = quoted_columns[table] or ""
            runs += [(table, plans[table].condition(bounds[i], bounds[i + 1], column)) for i in range(runs_here)]
        table, split = table + 1, 0
    return runs


def _current(offset: dict) -> dict:
    """An offset in this reader's form; one of the one-table reader that came before it (a
    checkpoint it wrote: ``{"plan": ..., "next": n}``) is the same position."""
    if "plans" in offset:
        return offset
    return {"plans": [offset["plan"]], "next": [0, int(offset["next"])]}


__all__ = ["DESCRIPTORS", "JdbcTablePlans", "JdbcTablePlansReader", "SOURCE_NAME", "admitted_through",
           "batch_descriptors"]
