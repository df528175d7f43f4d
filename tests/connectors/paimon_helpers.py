"""Paimon tables at hand in tests: a sink built from options, batches written through the one sink
protocol (decisions beside a local commit log), and tables read back with pypaimon's own reader."""

from __future__ import annotations

import io

from seatide.connectors.paimon.sink import PaimonSink
from seatide.plugin.base import SinkContext
from seatide.plugin.options import read_options
from seatide.plugin.rowkind import ROW_KIND_COLUMN, ROW_SEQ_COLUMN
from seatide.runtime.commit_log import SinkCommitLog
from seatide.runtime.sink_runs import sink_run


def make_sink(warehouse, table: str = "t", database: str = "db", **options) -> PaimonSink:
    return PaimonSink(read_options({"warehouse": str(warehouse), "database": database, "table": table, **options},
                                   PaimonSink.options))


def context(spark) -> SinkContext:
    return SinkContext(spark, "job", 1, "sink[0]", True, True, io.StringIO())


def run(spark, sink, log_dir, routes=None):
    """The sink opened as a pipeline start opens it (decided batches rolled forward)."""
    opened = sink_run(sink, context(spark), SinkCommitLog(str(log_dir)), routes=routes, transaction_prefix="T_job_1_0_L_")
    opened.roll_forward()
    return opened


def changes(spark, rows: list[tuple], ddl: str, sequenced: bool = False):
    """Rows whose last value is their RowKind, in order (one partition keeps it); ``sequenced``:
    numbered with ``__row_seq`` as a change source numbers them."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(*r[:-1], int(r[-1]), i) for i, r in enumerate(rows)],
                               f"{ddl}, _kind int, _seq bigint").coalesce(1)
    df = df.withColumn(ROW_KIND_COLUMN, F.col("_kind").cast("tinyint"))
    if sequenced:
        df = df.withColumn(ROW_SEQ_COLUMN, F.col("_seq"))
    return df.drop("_kind", "_seq")


def table_of(warehouse, name: str = "db.t"):
    from pypaimon import CatalogFactory

    return CatalogFactory.create({"warehouse": str(warehouse)}).get_table(name)


def rows_of(warehouse, name: str = "db.t", columns: tuple[str, ...] | None = None) -> list[tuple]:
    """The table's rows as a reader sees them, sorted."""
    table = table_of(warehouse, name)
    builder = table.new_read_builder()
    if columns:
        builder = builder.with_projection(list(columns))
    data = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    return sorted(tuple(r.values()) for r in data.to_pylist())


def snapshots(warehouse, name: str = "db.t") -> list[tuple]:
    """(commit user, identifier, kind) of every snapshot, oldest first."""
    manager = table_of(warehouse, name).snapshot_manager()
    latest = manager.get_latest_snapshot()
    found = []
    for snapshot_id in range(1, (latest.id if latest else 0) + 1):
        s = manager.get_snapshot_by_id(snapshot_id)
        found.append((s.commit_user, s.commit_identifier, s.commit_kind))
    return found


def put(warehouse, name: str, rows: dict, keys: list[str] | None = None):
    """Rows written by another writer (pypaimon directly), in a table created when missing."""
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    data = pa.table(rows)
    database = name.split(".")[0]
    catalog.create_database(database, True)
    catalog.create_table(name, Schema.from_pyarrow_schema(data.schema, primary_keys=keys,
                                                          options={"bucket": "1"} if keys else {}), True)
    table = catalog.get_table(name)
    builder = table.new_batch_write_builder()
    writer, commit = builder.new_write(), builder.new_commit()
    writer.write_arrow(data.cast(pa.schema([f.with_nullable(not keys or f.name not in keys) for f in data.schema])))
    commit.commit(writer.prepare_commit())
    writer.close()
    commit.close()


__all__ = ["changes", "context", "make_sink", "put", "rows_of", "run", "snapshots", "table_of"]
