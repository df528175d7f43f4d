"""What the Jdbc sink's tests share: a database of their own on each server, writers built as
the runtime builds them, frames of changes, and the runtime's batch protocol around a writer."""

from __future__ import annotations

import io
import secrets

import pytest

from seatide.connectors.jdbc.sink import JdbcSink
from seatide.connectors.jdbc.url import JdbcUrl
from seatide.plugin.base import SinkContext
from seatide.plugin.options import read_options
from seatide.plugin.rowkind import ROW_KIND_COLUMN, RowKind
from seatide.plugin.tables import TableFrames
from seatide.runtime.commit_log import FileDecisions, SinkCommitLog, write_exactly_once
from seatide.testing.pg_tablespace import in_memory

SERVERS = {
    "postgresql": ("jdbc:postgresql://127.0.0.1:5432/{db}", "postgres"),
    "mariadb": ("jdbc:mariadb://127.0.0.1:3306/{db}", "root"),
}


@pytest.fixture(scope="module", params=sorted(SERVERS))
def db(request):
    """A database of our own on each server, dropped afterwards: (url, user)."""
    template, user = SERVERS[request.param]
    name = f"jdbc_sink_{secrets.token_hex(4)}"
    admin = JdbcUrl.parse(template.format(db="test")).connect(user, autocommit=True)
    admin.cursor().execute(f"CREATE DATABASE {name}" + (in_memory() if request.param == "postgresql" else ""))
    yield template.format(db=name), user
    admin.cursor().execute(f"DROP DATABASE IF EXISTS {name}" + (" WITH (FORCE)" if "postgresql" in template else ""))
    admin.close()


def query(db, sql: str) -> list[tuple]:
    url, user = db
    conn = JdbcUrl.parse(url).connect(user, autocommit=True)
    try:
        cursor = conn.cursor()
        cursor.execute(sql)
        return [tuple(r) for r in cursor.fetchall()] if cursor.description else []
    finally:
        conn.close()


def execute(db, *statements: str) -> None:
    url, user = db
    conn = JdbcUrl.parse(url).connect(user, autocommit=True)
    try:
        for sql in statements:
            conn.cursor().execute(sql)
    finally:
        conn.close()


def table_name() -> str:
    return f"t_{secrets.token_hex(4)}"


def make_sink(db, **block) -> JdbcSink:
    url, user = db
    return JdbcSink(read_options({"url": url, "user": user, **block}, JdbcSink.options))


def context(spark, job: str, job_sinks: tuple = ()) -> SinkContext:
    return SinkContext(spark=spark, job_id=job, pipeline_id=1, plugin_id="sink[0]", micro_batch=True,
                       unbounded=False, stdout=io.StringIO(), checkpoints_retained=2, job_sinks=job_sinks)


def recorded_before(db, transaction_id: str, sink_id: str, batch: int = -1, rows: int = 0, schema: str = "") -> None:
    """A record an earlier SeaTide left in ``seatide_sink_commits`` (in ``schema``, else the
    connection's): a batch it committed, or (batch -1) a target's save modes it made."""
    where = f"{schema}.seatide_sink_commits" if schema else "seatide_sink_commits"
    execute(db, f"CREATE TABLE IF NOT EXISTS {where} (transaction_id VARCHAR(255) NOT NULL PRIMARY KEY, "
                "sink_id VARCHAR(255) NOT NULL, batch_id BIGINT NOT NULL, row_count BIGINT NOT NULL, "
                "committed_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)",
            f"INSERT INTO {where} (transaction_id, sink_id, batch_id, row_count) "
            f"VALUES ('{transaction_id}', '{sink_id}', {batch}, {rows})")


def frame(spark, rows: list[tuple], ddl: str):
    """Rows whose last value is their RowKind, in order (one partition keeps the order)."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(*r[:-1], int(r[-1])) for r in rows], f"{ddl}, _kind int").coalesce(1)
    return df.withColumn(ROW_KIND_COLUMN, F.col("_kind").cast("tinyint")).drop("_kind")


def txn(job: str, batch: int, lineage: str = "L1") -> str:
    """The runtime's transaction id: unique per job, pipeline, sink, lineage and batch."""
    return f"T_{job}_1_0_{lineage}_{batch}"


class FencedDecisions(FileDecisions):
    """File decisions whose fence is the test's: a zombie's fence raises right before COMMIT."""

    def __init__(self, log: SinkCommitLog, fence):
        super().__init__(log)
        self._fence = fence

    def fence(self) -> None:
        self._fence()


def write(writer, log_dir, df, batch: int, fence=None, staging_tag: str = ""):
    """One batch through the runtime's protocol; ``staging_tag``: the attempt that runs it."""
    job = writer.sink_id.split("/")[0]
    log = SinkCommitLog(str(log_dir))
    decisions = FencedDecisions(log, fence) if fence is not None else None
    return write_exactly_once(writer, log, df, batch, txn(job, batch), decisions=decisions, staging_tag=staging_tag)


def on_driver(df) -> TableFrames:
    """The batch as the runtime gives a small one: its rows already collected on the driver."""
    return TableFrames({0: df}, {0: df.count()}, lambda _index: df.schema, local={0: [tuple(r) for r in df.collect()]})


def spark_jobs_of(spark, step) -> list[int]:
    """The Spark jobs ``step`` ran (in this thread)."""
    sc = spark.sparkContext
    group = f"seatide-test-{secrets.token_hex(4)}"
    sc.setJobGroup(group, "counted by the test")
    try:
        step()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return list(sc.statusTracker().getJobIdsForGroup(group))


def inserts(spark, ids):
    return frame(spark, [(i, f"n{i}", RowKind.INSERT) for i in ids], "id bigint, name string")


def routes_writer(spark, db, sources: list[str], job: str, per_table: dict | None = None, **options):
    """A Jdbc sink's targets of routed tables (``sources``: the input tables' names), as a multi-table
    job's sink gets them; ``options``: the sink's, ``table`` defaulting to each input's own name,
    and ``per_table``: input name -> options of that table's sink alone (as placeholders fill them)."""
    from pyspark.sql import types as T

    from seatide.plan.catalog import table_routes
    from seatide.plugin.schema import Column, Schema
    from seatide.plugin.sink_protocol import open_sink

    columns = (Column("id", T.LongType()), Column("name", T.StringType()))

    def build(_options, catalog):
        name = catalog.table.split(".")[-1]
        return make_sink(db, **{"table": name, **options, **(per_table or {}).get(name, {})})

    routes = table_routes([Schema(columns, f"src.{n}") for n in sources], {}, build=build)
    return open_sink(routes[0].sink, context(spark, job), routes)


def staging_engines_at_commit(db, writer, tmp_path, df) -> list[str]:
    """The engines of the batch's staging tables, seen from another session just before COMMIT."""
    seen: list[str] = []

    def look() -> None:
        seen.extend(e for (e,) in query(db, "SELECT engine FROM information_schema.tables WHERE "
                                            "table_schema = DATABASE() AND table_name LIKE 'seatide_stage%'"))
    write(writer, tmp_path, df, 0, fence=look)
    return seen


def staging_tables(db) -> list[str]:
    here = "current_schema()" if "postgresql" in db[0] else "DATABASE()"
    return [t for (t,) in query(db, "SELECT table_name FROM information_schema.tables WHERE "
                                    f"table_name LIKE 'seatide_stage%' AND table_schema = {here}")]
