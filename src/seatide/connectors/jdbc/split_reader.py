"""The checkpointed Jdbc read: a Python streaming data source that reads split by split.

Offsets are ``{"plan": SplitPlan, "next": n}``: splits ``0..n-1`` are admitted. The plan
is measured in the database (min, max, count of the partition column) the first time the
stream starts (``initialOffset``) and from then on travels inside every offset Spark logs,
so a stream restarted from its checkpoint replays and continues with the same split
bounds, even if the table has grown. Each micro-batch admits whole splits, as many as
fit in the batch's row limit (at least one).

Rows are fetched in Spark's Python workers with the dialect's native client (psycopg,
PyMySQL) and handed to Spark as Arrow record batches of exactly the Spark schema.
The class lives in an importable module because the workers unpickle it.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from seatide.connectors.decimals import DecimalOverflow, decimal_converter
from seatide.connectors.jdbc.splits import SplitPlan

SOURCE_NAME = "seatide_jdbc_splits"
DEFAULT_FETCH_ROWS = 10_000


# -- native value -> Spark value ------------------------------------------------------------
def _utc_wall_time(value):
    if value is None or value.tzinfo is None:
        return value
    return value.astimezone(dt.timezone.utc).replace(tzinfo=None)


def _utc_time_of_day(value):
    if value is None or value.tzinfo is None:
        return value
    moment = dt.datetime.combine(dt.date(2000, 1, 1), value).astimezone(dt.timezone.utc)
    return moment.time()


def _timedelta_to_time(value):
    if value is None or isinstance(value, dt.time):
        return value
    # MySQL TIME is a duration (-838:59:59..838:59:59); SeaTunnel's TIME is a time of day.
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    micros %= 86_400 * 1_000_000
    seconds, micro = divmod(micros, 1_000_000)
    return dt.time(seconds // 3600, seconds // 60 % 60, seconds % 60, micro)



CONVERTERS = {
    "utc_wall_time": _utc_wall_time,
    "utc_time_of_day": _utc_time_of_day,
    "timedelta_to_time": _timedelta_to_time,
    "bit_to_bool": lambda v: None if v is None else any(v),
    "int_to_bool": lambda v: None if v is None else v != 0,
    "int_to_decimal": lambda v: None if v is None else Decimal(v),
    "decimal_38_18": decimal_converter(38, 18),
    "text": lambda v: None if v is None else str(v),
}


def stream_options(*, url: str, user: str | None, password: str | None, select_sql: str,
                   plan_sql: str, quoted_column: str | None, column: str | None, kind: str,
                   converts: list[str | None], split_size: int, partition_num: int | None,
                   fetch_size: int, max_rows: int, tasks: int, dialect: str = "",
                   strings: dict | None = None) -> dict[str, str]:
    """Options for ``spark.readStream.format(SOURCE_NAME)`` (Spark passes options as strings);
    ``dialect`` and ``strings``: a string column's cut points (``split_measure``)."""
    return {"spec": json.dumps({
        "url": url, "user": user, "password": password, "select_sql": select_sql,
        "plan_sql": plan_sql, "quoted_column": quoted_column, "column": column, "kind": kind,
        "converts": converts, "split_size": split_size, "partition_num": partition_num,
        "fetch_size": fetch_size, "max_rows": max_rows, "tasks": max(1, tasks), "dialect": dialect,
        "strings": strings})}


class SplitRange(InputPartition):
    """Splits ``first..stop-1`` of ``plan``: one Spark task, one range query."""

    def __init__(self, plan: SplitPlan, first: int, stop: int):
        super().__init__((first, stop))
        self.plan, self.first, self.stop = plan, first, stop


class JdbcSplitSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def streamReader(self, schema) -> "JdbcSplitReader":
        return JdbcSplitReader(json.loads(self.options["spec"]), schema)


class JdbcSplitReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, spec: dict, schema):
        from pyspark.sql.pandas.types import to_arrow_schema

        self.spec = spec
        # Made here, where offsets are planned, and pickled to the tasks: the module that
        # makes it imports pandas, seconds of work that every Python worker would repeat.
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self._plan: SplitPlan | None = None

    # -- offsets ---------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        return {"plan": self._first_plan().to_json(), "next": 0}

    def _first_plan(self) -> SplitPlan:
        if self._plan is None:
            self._plan = self._measure()
        return self._plan

    def _measure(self) -> SplitPlan:
        from seatide.connectors.jdbc.split_measure import measure
        from seatide.connectors.jdbc.url import JdbcUrl

        spec = self.spec
        with JdbcUrl.parse(spec["url"]).connect(spec["user"], spec["password"], autocommit=True) as conn:
            return measure(conn, spec)

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.spec["max_rows"])

    def prepareForTriggerAvailableNow(self) -> None:
        """Nothing to pin: the plan in the offsets already bounds the stream."""

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        plan = SplitPlan.from_json(start["plan"])
        begin = int(start["next"])
        if isinstance(limit, ReadAllAvailable):
            admitted = plan.count
        else:
            max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.spec["max_rows"]
            admitted = plan.splits_within(begin, max_rows)
        return {"plan": start["plan"], "next": min(plan.count, admitted)}

    def partitions(self, start: dict, end: dict) -> list[SplitRange]:
        plan = SplitPlan.from_json(end["plan"])
        begin, stop = int(start["next"]), int(end["next"])
        count = stop - begin
        if count <= 0:
            return []
        # A task per split would pay Spark's and the database's per-task cost hundreds of times
        # (split.size is small); a batch's splits are cut into one contiguous run per task slot.
        tasks = min(count, self.spec["tasks"])
        bounds = [begin + i * count // tasks for i in range(tasks + 1)]
        return [SplitRange(plan, bounds[i], bounds[i + 1]) for i in range(tasks)]

    def commit(self, end: dict) -> None:
        """Nothing buffered: a split is read from the database when its batch runs."""

    # -- rows ------------------------------------------------------------------------------
    def read(self, partition: SplitRange) -> Iterator:
        import pyarrow as pa

        spec, arrow_schema = self.spec, self.arrow_schema
        converts = [CONVERTERS[name] if name else None for name in spec["converts"]]
        condition = partition.plan.condition(partition.first, partition.stop, spec["quoted_column"] or "")
        sql = spec["select_sql"] + (f" WHERE {condition}" if condition else "")
        fetch = spec["fetch_size"] or DEFAULT_FETCH_ROWS
        for rows in _fetch(spec, sql, fetch):
            columns = list(zip(*rows))
            arrays = []
            for values, convert, field in zip(columns, converts, arrow_schema):
                if convert is not None:
                    values = _converted(values, convert, field.name)
                arrays.append(pa.array(values, type=field.type))
            yield pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)


def _converted(values, convert, column: str) -> list:
    try:
        return [convert(v) for v in values]
    except DecimalOverflow as exc:
        from seatide.plugin.base import permanent_in_worker

        raise permanent_in_worker(
            f"Jdbc source: column {column}: {exc}. SeaTide never turns such a value into null: "
            f"cast the column in query (e.g. CAST({column} AS numeric(38, 6)) for fewer decimals, "
            f"or CAST({column} AS text) for every digit)") from None


def _fetch(spec: dict, sql: str, fetch: int) -> Iterator[list[tuple]]:
    """Rows of ``sql`` in chunks of ``fetch``, streamed from the server (not buffered whole)."""
    from seatide.connectors.jdbc.url import POSTGRESQL, JdbcUrl

    url = JdbcUrl.parse(spec["url"])
    if url.dialect == POSTGRESQL:
        from psycopg.types.string import TextLoader

        with url.connect(spec["user"], spec["password"]) as conn:
            from seatide.connectors.jdbc.read_types import PG_TEXT_OIDS

            for oid in PG_TEXT_OIDS:       # json, jsonb, uuid arrive as SeaTunnel strings
                conn.adapters.register_loader(oid, TextLoader)
            with conn.cursor(name="seatide_split") as cursor:
                cursor.itersize = fetch
                cursor.execute(sql)
                while rows := cursor.fetchmany(fetch):
                    yield rows
        return
    import pymysql.cursors

    with url.connect(spec["user"], spec["password"], cursorclass=pymysql.cursors.SSCursor) as conn:
        with conn.cursor() as cursor:
            cursor.execute(sql)
            while rows := cursor.fetchmany(fetch):
                yield rows


__all__ = ["CONVERTERS", "JdbcSplitReader", "JdbcSplitSource", "SOURCE_NAME", "stream_options"]
