"""Several writers of one job into one target: the save modes are made once for the job.

A target's save-mode decision (DROP_DATA: empty it before the job's rows) belongs to the job run
and the target, not to one sink or one pipeline: a second sink of a pipeline, or a sink of another
pipeline, that first prepares the target after the first writer committed into it finds the
decision made and destroys nothing the job wrote (review of the sinks, finding 1).
"""

from __future__ import annotations

import os
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.connectors.jdbc_sink_helpers import execute, query, table_name
from seatide import failpoints
from tests.e2e.harness import InProcessCluster, wait_for
from tests.e2e.test_jobs import parquet_ids

pytestmark = pytest.mark.spark

PG = ("jdbc:postgresql://127.0.0.1:5432/test", "postgres")
OLD = -1                # the id of a row in the target before the job: DROP_DATA removes it
ROWS = 3                # each writer's rows: ids 0..ROWS-1


def _source(name: str) -> str:
    return f"""FakeSource {{ plugin_output = "{name}", row.num = {ROWS}, split.num = 1, sequence.field = "id",
                      schema = {{ fields {{ id = bigint, name = string }} }} }}"""


def _job(sink: str, pipelines: int) -> str:
    """Two writers of ``sink`` (a block without its plugin_input) into one target: two sinks of
    one pipeline (one source), or one sink each of two pipelines (two sources)."""
    sources = [_source("a")] if pipelines == 1 else [_source("a"), _source("b")]
    inputs = ["a", "a"] if pipelines == 1 else ["a", "b"]
    sinks = "\n".join(sink.replace("{", f'{{ plugin_input = "{name}",', 1) for name in inputs)
    return f"""
env {{ job.mode = BATCH, parallelism = 1, job.retry.interval.seconds = 0 }}
source {{
{chr(10).join(sources)}
}}
sink {{ {sinks} }}
"""


class JdbcTarget:
    def __init__(self):
        self.table = table_name()
        execute(PG, f"CREATE TABLE {self.table} (id bigint, name text)", f"INSERT INTO {self.table} VALUES ({OLD}, 'old')")

    def sink(self) -> str:
        return f'Jdbc {{ url = "{PG[0]}", user = "{PG[1]}", table = "{self.table}", data_save_mode = "DROP_DATA" }}'

    def ids(self) -> list[int]:
        return [r[0] for r in query(PG, f"SELECT id FROM {self.table} ORDER BY id")]


class LocalFileTarget:
    def __init__(self, root: str):
        self.path = os.path.join(root, "out")
        os.makedirs(self.path)
        pq.write_table(pa.table({"id": [OLD], "name": ["old"]}), os.path.join(self.path, "old.parquet"))

    def sink(self) -> str:
        return (f'LocalFile {{ path = "{self.path}", file_format_type = "parquet", '
                'data_save_mode = "DROP_DATA" }')

    def ids(self) -> list[int]:
        return parquet_ids(self.path)


class IcebergTarget:
    def __init__(self, root: str):
        from seatide.connectors.iceberg.catalogs import load_catalog

        self.config = {"type": "hadoop", "warehouse": f"file://{root}/warehouse"}
        catalog = load_catalog("default", self.config)
        catalog.create_namespace("ns")
        table = catalog.create_table("ns.t", schema=pa.schema([("id", pa.int64()), ("name", pa.string())]))
        table.append(pa.table({"id": pa.array([OLD], pa.int64()), "name": ["old"]}, schema=table.schema().as_arrow()))

    def sink(self) -> str:
        config = ", ".join(f'"{k}" = "{v}"' for k, v in self.config.items())
        return f'Iceberg {{ namespace = ns, table = t, iceberg.catalog.config = {{ {config} }}, data_save_mode = DROP_DATA }}'

    def ids(self) -> list[int]:
        from seatide.connectors.iceberg.catalogs import load_catalog
        from seatide.connectors.iceberg.datafiles import local_path

        # the current snapshot's files as written (a table made outside SeaTide has no name mapping
        # for pyiceberg's scan to read SeaTide's files by; appends only: no delete files)
        table = load_catalog("default", self.config).load_table("ns.t")
        return sorted(i for task in table.scan().plan_files()
                      for i in pq.read_table(local_path(task.file.file_path)).column("id").to_pylist())


TARGETS = {"Jdbc": lambda _root: JdbcTarget(), "LocalFile": LocalFileTarget, "Iceberg": IcebergTarget}


@pytest.mark.parametrize("pipelines", [1, 2], ids=["two-sinks-one-pipeline", "two-pipelines"])
@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_two_writers_of_one_job_into_one_target_keep_each_others_rows(spark, tmp_path, monkeypatch, kind, pipelines):
    """Purpose: DROP_DATA empties a target once for the job, before its first rows, however many
    sinks or pipelines of the job write it.

    How: a target holding a row from before the job; two writers of the job (two sinks of one
    pipeline, or a sink in each of two pipelines), each writing ids 0..2 with DROP_DATA, run by
    the runtime in process. The second writer's save modes are held (failpoint ``sink.save_modes``,
    its second hit) until the first writer's rows are in the target.
    Passing: the old row is gone and both writers' rows are there (each id twice).
    """
    target = TARGETS[kind](str(tmp_path))
    assert target.ids() == [OLD]
    gate = str(tmp_path / "first-writer-committed")
    monkeypatch.setitem(failpoints._POINTS, "sink.save_modes", f"gate:1:{gate}")
    monkeypatch.setitem(failpoints._HITS, "sink.save_modes", 0)

    def open_when_first_committed():
        try:
            wait_for(lambda: target.ids() == list(range(ROWS)), "the first writer's rows", 120)
        finally:
            open(gate, "w").close()

    watcher = threading.Thread(target=open_when_first_committed, daemon=True)
    watcher.start()
    run = InProcessCluster(spark, str(tmp_path / "data")).run(_job(target.sink(), pipelines))
    watcher.join(10)
    assert run.status == "FINISHED", run.error
    assert target.ids() == sorted(list(range(ROWS)) * 2), "a second writer's save mode emptied the first's rows"
