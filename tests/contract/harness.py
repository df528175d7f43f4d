"""The runtime around a sink, for the contract suite: a pipeline of a job in a real store, whose
attempts open the sink as a driver does (``runtime.sink_runs.attempt_run``), and zombies held at
a named step while the test replaces their attempt, as the leader does when it declares an
attempt lost."""

from __future__ import annotations

import io
import os
import secrets
import threading
import time
from dataclasses import dataclass, field

from sqlalchemy import insert, update

from seatide import failpoints
from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan
from seatide.plan.outline import outline_json
from seatide.plugin.base import SinkContext
from seatide.plugin.rowkind import ROW_KIND_COLUMN, ROW_SEQ_COLUMN, RowKind
from seatide.plugin.tables import TableFrames, TableRoute
from seatide.runtime.reporter import AttemptReporter
from seatide.runtime.sink_runs import attempt_run, commit_log_of
from seatide.store import schema as s
from seatide.store.jobs import submit_job
from seatide.testing.cluster import wait_for

SCHEMA = f"id bigint, name string, {ROW_KIND_COLUMN} tinyint"
JOB = """
source { FakeSource { row.num = 3, schema = { fields { id = bigint } } } }
sink { LocalFile { path = "/tmp/unused", file_format_type = "csv" } }
"""


def submit(store, data_dir, job_id: str = "j1") -> None:
    """A job in the store (its pipeline 1's sink is the one the test opens)."""
    config = load_job_text(JOB)
    submit_job(store, text=JOB, variables={}, config=config, plan=build_plan(config),
               outline=outline_json(config), data_dir=str(data_dir), job_id=job_id)


def new_attempt(store, job_id: str, number: int) -> int:
    """What the leader does: the current attempt (if any) is LOST, a new one is current."""
    with store.write() as conn:
        conn.execute(update(s.attempts).where(s.attempts.c.job_id == job_id).values(state="LOST"))
        attempt_id = conn.execute(insert(s.attempts).values(
            job_id=job_id, incarnation=1, number=number, worker_id="w", state="RUNNING",
            created_at=time.time(), kill_requested=False)).inserted_primary_key[0]
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == job_id).values(current_attempt=attempt_id))
    return attempt_id


def rows(spark, ids):
    return spark.createDataFrame([(i, f"row {i}", 0) for i in ids], SCHEMA)


def tables(spark, by_route: dict[int, list[int]]) -> TableFrames:
    """A multi-table batch: each route's rows (routes without rows left out, as the runtime does)."""
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL(SCHEMA)
    return TableFrames({index: rows(spark, ids) for index, ids in by_route.items()}, schema_of=lambda _i: schema)


def changes(spark, by_route: dict[int, list[tuple[int, str, int]]]) -> TableFrames:
    """A multi-table batch of changes: each route's (id, kind as ``+I``/``-D``, ``__row_seq``)."""
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL(f"{SCHEMA}, {ROW_SEQ_COLUMN} bigint")
    kinds = {kind.short: int(kind) for kind in RowKind}
    return TableFrames({index: spark.createDataFrame([(i, f"row {i}", kinds[kind], seq) for i, kind, seq in changes],
                                                     schema)
                        for index, changes in by_route.items()}, schema_of=lambda _i: schema)


def routes(system, targets: list[str], **options) -> list[TableRoute]:
    """One route per table, table ``i`` into ``targets[i]`` (the sink built for each table)."""
    return [TableRoute(i, f"shop.t{i}", None, system.sink(target, **options)) for i, target in enumerate(targets)]


@dataclass
class Pipeline:
    """Pipeline 1 of a job of its own; its attempts open one sink (``sink[0]``) over one checkpoint."""

    store: object
    workdir: str
    job_id: str = field(default_factory=lambda: f"c{secrets.token_hex(4)}")
    origin: str = "o1"
    attempts: int = 0

    def __post_init__(self):
        submit(self.store, self.workdir, self.job_id)

    def attempt(self) -> AttemptReporter:
        """A new current attempt: the one before, if any, is LOST (a zombie from now on)."""
        self.attempts += 1
        attempt_id = new_attempt(self.store, self.job_id, self.attempts)
        return AttemptReporter(self.store, self.job_id, 1, attempt_id)

    def open(self, reporter: AttemptReporter, sink_or_routes, spark=None, lineage: str = "L"):
        """The sink as ``reporter``'s attempt opens it at the pipeline's start (decided batches
        rolled forward); a list of routes is a multi-table input; ``lineage``: the checkpoint's branch."""
        multi = isinstance(sink_or_routes, list)
        sink = sink_or_routes[0].sink if multi else sink_or_routes
        ctx = SinkContext(spark, self.job_id, 1, "sink[0]", True, True, io.StringIO())
        log = commit_log_of(os.path.join(self.workdir, self.job_id), "sink[0]", lineage)
        run = attempt_run(sink, ctx, log, reporter, routes=sink_or_routes if multi else None, job_id=self.job_id,
                          pipeline_id=1, sink_index=0, lineage=lineage, origin=self.origin)
        run.roll_forward()
        return run


class Zombie:
    """A batch run in a thread that a gate holds at failpoint ``step`` (its first hit in the
    process) until ``release``; then it goes on and ends as it may (``error``, ``result``)."""

    def __init__(self, step: str, gate: str, monkeypatch, work):
        self.step, self.gate = step, gate
        monkeypatch.setitem(failpoints._POINTS, step, f"gate:0:{gate}")
        monkeypatch.setitem(failpoints._HITS, step, 0)
        self.outcome: dict = {}
        self.thread = threading.Thread(target=self._run, args=(work,), daemon=True)
        self.thread.start()
        wait_for(lambda: failpoints._HITS.get(step, 0) >= 1 or not self.thread.is_alive(), 120,
                 message=f"the zombie at {step}")
        assert self.thread.is_alive(), f"the zombie never reached {step}: {self.outcome}"
        monkeypatch.delitem(failpoints._POINTS, step)       # the replacement is not held

    def _run(self, work) -> None:
        try:
            self.outcome["result"] = work()
        except BaseException as exc:      # noqa: BLE001 - what the zombie ended with, checked by the test
            self.outcome["error"] = exc

    def release(self) -> dict:
        open(self.gate, "w").close()
        self.thread.join(120)
        assert not self.thread.is_alive(), "the zombie did not end"
        return self.outcome


__all__ = ["Pipeline", "Zombie", "changes", "new_attempt", "routes", "rows", "submit", "tables"]
