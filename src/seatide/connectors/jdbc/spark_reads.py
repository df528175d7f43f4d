"""A plain BATCH Jdbc read (no checkpoints): Spark's own JDBC reader, in parallel ranges of the
partition column, or one predicate per split for a string column; SeaTunnel's types on the way.

A mixin of ``JdbcSource`` (``source.py``), apart from it because this is one of its two ways to
read, the one that needs no split bookkeeping: the micro-batch way (``split_reader``) and what
both share (the query, its partitioning and its plan) stay in ``source.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from seatide.connectors.jdbc.read_types import spark_column
from seatide.connectors.jdbc.splits import STRING
from seatide.plugin.base import ReadContext
from seatide.plugin.rowkind import ROW_KIND_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_TASKS_PER_SLOT = 1


def task_slots(ctx: ReadContext) -> int:
    return max(ctx.parallelism, ctx.spark.sparkContext.defaultParallelism)


class SparkJdbcReads:
    def _reader_options(self) -> dict:
        # SeaTunnel's TIMESTAMP has no time zone: read it as such, rather than cast every value
        options = {"url": self.url.for_spark(), "driver": self.driver, "preferTimestampNTZ": "true"}
        for key in ("user", "password"):
            if self.opts[key] is not None:
                options[key] = self.opts[key]
        if self.opts["fetch_size"]:
            options["fetchsize"] = str(self.opts["fetch_size"])
        options.update({str(k): str(v) for k, v in (self.opts["properties"] or {}).items()})
        return options

    def _parallel(self, ctx: ReadContext) -> "DataFrame":
        options = {**self._reader_options(), "dbtable": f"({self._select_sql()}) seatide_src"}
        # Spark's reader streams each range, so splits of split.size rows would only add
        # per-task cost (and counting the rows a query of its own): without partition_num,
        # Spark gets one range per task slot, as a hand-written spark.read.jdbc would.
        if self.partitioning.kind == STRING and self.partition is not None:
            # Spark's ranges are numbers and dates: a string column's splits go as predicates
            plan = self.plan(count=False, tiles=self.opts["partition_num"] or _TASKS_PER_SLOT * task_slots(ctx))
            quoted = self.partitioning.quoted
            return self._predicated(ctx, [plan.condition(i, i + 1, quoted) or "1 = 1" for i in range(plan.count)])
        plan = self.plan(count=False) if self.partition is not None else None
        if plan is not None and plan.upper > plan.lower:
            lower, upper = plan.spark_bounds()
            count = self.opts["partition_num"] or _TASKS_PER_SLOT * task_slots(ctx)
            options.update(partitionColumn=self.partition.name, lowerBound=lower, upperBound=upper,
                           numPartitions=str(min(count, plan.upper - plan.lower + 1)))
        df = ctx.spark.read.format("jdbc").options(**options).load()
        return self._as_seatunnel_types(df)

    def _as_seatunnel_types(self, df: "DataFrame") -> "DataFrame":
        from pyspark.sql import functions as F

        spark_types = {f.name: f.dataType for f in df.schema.fields}
        # One projection (each a Spark analysis, ≈20 ms: a table_list of 100 tables pays it per
        # table); a cast drops a field's metadata, so the declared column types go on with it.
        return df.select(*[F.expr(spark_column(c, spark_types[c.name])).alias(f.name, metadata=f.metadata)
                           for c, f in zip(self._columns, self.schema())],
                         F.lit(0).cast("tinyint").alias(ROW_KIND_COLUMN))

    def _predicated(self, ctx: ReadContext, predicates: list[str]) -> "DataFrame":
        """The rows of the query's splits that ``predicates`` select, one Spark partition each."""
        options = self._reader_options()
        url, user, password = options.pop("url"), options.pop("user", None), options.pop("password", None)
        properties = {**options, **({"user": user} if user is not None else {}),
                      **({"password": password} if password is not None else {})}
        df = ctx.spark.read.jdbc(url, f"({self._select_sql()}) seatide_src", predicates=predicates,
                                 properties=properties)
        return self._as_seatunnel_types(df)
