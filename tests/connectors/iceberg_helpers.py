"""Shared pieces of the Iceberg tests: catalogs (a warehouse directory, SQLite, PostgreSQL, a REST
catalog), a sink's targets on the shared SparkSession, change rows, and reading a table back with
pyiceberg's scan."""

from __future__ import annotations

import io
import os
import secrets
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass

import pytest
from sqlalchemy import create_engine, text

from seatide.connectors.iceberg.catalogs import load_catalog
from seatide.connectors.iceberg.sink import IcebergSink
from seatide.plugin.base import SinkContext
from seatide.plugin.options import read_options
from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.plugin.sink_protocol import open_sink
from seatide.runtime.commit_log import FileDecisions, SinkCommitLog, write_exactly_once
from seatide.testing.cluster import free_port
from seatide.testing.pg_tablespace import in_memory
from tests.held import Held  # noqa: F401 - the Iceberg tests' import

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
REST_STARTUP_DEADLINE_S = 60.0


@dataclass(frozen=True)
class RestServer:
    url: str
    root: str
    process: subprocess.Popen

    def config(self) -> dict:
        """A ``type = "rest"`` catalog config with a warehouse of its own (the server's prefix)."""
        return {"type": "rest", "uri": self.url, "warehouse": f"w{secrets.token_hex(5)}"}


@pytest.fixture(scope="session")
def iceberg_rest_server(tmp_path_factory):
    """SeaTide's Iceberg REST catalog test server (seatide.testing.iceberg_rest), a process of its
    own on a free port, shared by the session: each test takes its own warehouse name."""
    root = str(tmp_path_factory.mktemp("iceberg-rest"))
    port = free_port()
    log = open(os.path.join(root, "server.log"), "wb")
    process = subprocess.Popen([sys.executable, "-m", "seatide.testing.iceberg_rest", "--port", str(port),
                                "--warehouse", os.path.join(root, "warehouse")], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + REST_STARTUP_DEADLINE_S
    try:
        while True:
            assert process.poll() is None, open(os.path.join(root, "server.log")).read()
            try:
                with urllib.request.urlopen(url + "/v1/config", timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline, "the Iceberg REST catalog server did not answer in time"
                time.sleep(0.05)
        yield RestServer(url, root, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture(params=["hadoop", "jdbc-sqlite", "jdbc-postgresql", "rest"])
def catalog_config(request, tmp_path):
    """``iceberg.catalog.config`` of each kind SeaTide writes to."""
    warehouse = f"file://{tmp_path}/warehouse"
    if request.param == "rest":
        yield request.getfixturevalue("iceberg_rest_server").config()
        return
    if request.param == "hadoop":
        yield {"type": "hadoop", "warehouse": warehouse}
        return
    if request.param == "jdbc-sqlite":
        yield {"type": "jdbc", "uri": f"jdbc:sqlite:{tmp_path}/catalog.db", "warehouse": warehouse}
        return
    name = f"iceberg_{secrets.token_hex(4)}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}{in_memory()}"))
    yield {"type": "jdbc", "uri": f"jdbc:postgresql://127.0.0.1:5432/{name}", "jdbc.user": "postgres",
           "warehouse": warehouse}
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    admin.dispose()


def make_sink(config: dict, table: str = "t", **options) -> IcebergSink:
    block = {"namespace": "ns", "table": table, "iceberg.catalog.config": config, **options}
    return IcebergSink(read_options(block, IcebergSink.options))


def context(spark, job: str = "job", plugin: str = "sink[0]", job_sinks: tuple = ()) -> SinkContext:
    return SinkContext(spark=spark, job_id=job, pipeline_id=1, plugin_id=plugin, micro_batch=True, unbounded=False,
                       stdout=io.StringIO(), checkpoints_retained=2, job_sinks=job_sinks)


def opened(sink: IcebergSink, spark, **ctx):
    """The sink's targets for one table (a route list of one), as the runtime opens them."""
    return open_sink(sink, context(spark, **ctx))


def txn(batch: int, lineage: str = "L1", job: str = "job") -> str:
    """The runtime's transaction id: run, pipeline, sink, lineage and batch."""
    return f"T_{job}_1_0_{lineage}_{batch}"


class AttemptDecisions(FileDecisions):
    """File decisions fenced as the store fences an attempt's (``StoreDecisions``): the test's
    ``fence`` raises once the attempt is no longer current, and every decision checks it first."""

    def __init__(self, log: SinkCommitLog, fence):
        super().__init__(log)
        self._fence = fence

    def fence(self) -> None:
        self._fence()

    def decide(self, batch_id: int, transaction_id: str, manifest: dict) -> dict:
        self._fence()
        return super().decide(batch_id, transaction_id, manifest)

    def decide_once(self, key: str, plan: dict) -> dict:
        self._fence()
        return super().decide_once(key, plan)


def write(writer, log_dir, df, batch: int, lineage: str = "L1", fence=None, attempt: str = "", job: str = "job"):
    """One batch through the runtime's exactly-once path; ``attempt`` names the attempt's own
    staging, as the driver's attempt id does (a zombie and its replacement never share it);
    ``job``: the run its transaction id names (rows of another run than the sink's context's
    are not the job's: its save modes are made over them)."""
    log = SinkCommitLog(str(log_dir))
    decisions = AttemptDecisions(log, fence) if fence is not None else None
    return write_exactly_once(writer, log, df, batch, txn(batch, lineage, job), decisions=decisions,
                              staging_tag=attempt)


def changes(spark, rows: list[tuple], ddl: str):
    """Rows whose last value is their RowKind, in order (one partition keeps the order)."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(*r[:-1], int(r[-1])) for r in rows], f"{ddl}, _kind int").coalesce(1)
    return df.withColumn(ROW_KIND_COLUMN, F.col("_kind").cast("tinyint")).drop("_kind")


def table_of(config: dict, name: str = "ns.t"):
    return load_catalog("default", config).load_table(name)


def rows_of(config: dict, name: str = "ns.t", columns: tuple[str, ...] | None = None, **scan) -> list[tuple]:
    """The table's rows by pyiceberg's own scan, sorted."""
    arrow = table_of(config, name).scan(**scan).to_arrow()
    names = list(columns or arrow.column_names)
    return sorted(zip(*[arrow.column(c).to_pylist() for c in names])) if arrow.num_rows else []


def read_back(spark, config, micro_batch: bool = False, **options) -> list[tuple]:
    """The table's rows as SeaTide's Iceberg source reads them (a BATCH read of the current
    snapshot), deletes applied: pyiceberg's own scan refuses equality deletes."""
    from seatide.connectors.iceberg.source import IcebergSource
    from seatide.plugin.base import ReadContext
    from seatide.plugin.options import read_options
    from seatide.plugin.rowkind import ROW_KIND_COLUMN

    block = {"namespace": "ns", "table": "t", "iceberg.catalog.config": config, **options}
    source = IcebergSource(read_options(block, IcebergSource.options))
    ctx = ReadContext(spark, micro_batch=micro_batch, unbounded=False, parallelism=1, max_rows_per_batch=1000,
                      read_interval_ms=1000, plugin_id="source[0]")
    return sorted(tuple(r) for r in source.read(ctx).drop(ROW_KIND_COLUMN).collect())


def batch_snapshots(config: dict, name: str = "ns.t") -> list[str]:
    """The transaction ids of the table's snapshots, oldest first."""
    table = table_of(config, name)
    return [s.summary.additional_properties.get("seatide.transaction-id") for s in
            sorted(table.metadata.snapshots, key=lambda s: s.sequence_number)]


def routed_writer(spark, config: dict, tables: list[str], **options):
    """The sink's targets of a multi-table input whose routes are ``tables`` (source table names), each
    route's sink made of ``options``: routes naming the same Iceberg table are one target."""
    from seatide.plugin.tables import TableRoute

    routes = [TableRoute(i, name, None, make_sink(config, **options)) for i, name in enumerate(tables)]
    return open_sink(routes[0].sink, context(spark), routes)


def write_routed(writer, log_dir, frames: dict, batch: int, lineage: str = "L1"):
    """One batch of a multi-table input: ``frames`` is each route's rows by route index (the
    routes share one shape, which a route without rows in the batch has too)."""
    from seatide.plugin.tables import TableFrames

    shape = next(iter(frames.values())).schema
    return write(writer, log_dir, TableFrames(frames, schema_of=lambda _index: shape), batch, lineage)


def orphans(config: dict, name: str = "ns.t") -> list[str]:
    """Parquet files under the table's data directory that no snapshot references."""
    table = table_of(config, name)
    referenced = {e.data_file.file_path.removeprefix("file://") for s in table.metadata.snapshots
                  for m in s.manifests(table.io) for e in m.fetch_manifest_entry(table.io)}
    data = table.metadata.location.removeprefix("file://") + "/data"
    return sorted(os.path.join(d, f) for d, _, files in os.walk(data) for f in files
                  if f.endswith(".parquet") and os.path.join(d, f) not in referenced)
