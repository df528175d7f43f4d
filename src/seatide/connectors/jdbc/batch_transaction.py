"""A Jdbc sink batch's one transaction: its commit record, every target's staged rows applied, the
fence, COMMIT (targets.py has the whole protocol).

Targets Spark stages come as their stagings end: from the first one on the transaction is open
(its record, inserted first, makes a racing attempt of the batch wait) and each is applied while
the others still stage; meanwhile the session speaks now and then, so that the server's idle limit
ends only a silent one (sink_session.py). Rows collected on the driver are staged here, into
temporary tables of this transaction, unless they were staged before it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Iterator

from seatide.connectors.jdbc.commit_record import CommitRecords
from seatide.connectors.jdbc.sink_session import keep_alive, keepalive_every_s
from seatide.connectors.jdbc.staging import stage_all
from seatide.connectors.jdbc.target_table import StageColumns, TargetTable
from seatide.plugin.base import Batch

log = logging.getLogger(__name__)


@dataclass
class TargetStaging:
    """One target's staging table in a batch, and what is left of filling it."""

    table: TargetTable
    columns: StageColumns | None      # known once the staging table is made
    stage: tuple[str, ...]
    left: int = 0          # routes still staging (Spark)
    rows: int = 0
    collected: dict = field(default_factory=dict)     # route index -> (rows, schema), collected on the driver
    spark: list = field(default_factory=list)         # (route, frame, staging table, column set) for Spark


@dataclass
class Timing:
    """What a batch's commit reports for the log."""

    rows: int = 0
    staged: float = 0.0       # perf_counter when the last table's staging was applied
    committed: float = 0.0
    by_another: bool = False  # another attempt committed the batch meanwhile: nothing applied

    def done(self, by_another: bool = False) -> "Timing":
        self.by_another = by_another
        self.committed = time.perf_counter()
        self.staged = self.staged or self.committed
        return self


def commit(conn, records: CommitRecords, sink_id: str, batch: Batch, spark_url: str, by_spark: list[TargetStaging],
           by_driver: list[TargetStaging], temporary: bool) -> Timing:
    """Run the transaction. ``temporary``: the rows of ``by_driver`` are staged here, in temporary
    tables (else they were staged into ordinary ones before it)."""
    cursor = conn.cursor()
    timing = Timing()
    recorded = False
    staged = _whole_targets(by_spark, stage_all([w for s in by_spark for w in s.spark], spark_url,
                                                lambda: keep_alive(conn), keepalive_every_s()))
    try:
        for staging in staged:
            if not recorded:
                if not _record(conn, records, sink_id, batch):
                    return timing.done(by_another=True)
                recorded = True
            staging.table.apply(cursor, staging.columns, staging.stage, in_transaction_drop=True,
                                staged_rows=staging.rows)
            timing.rows += staging.rows
    finally:
        staged.close()      # after an error: no more tables start staging; those staging end
    timing.staged = time.perf_counter()
    collected = sum(len(rows) for s in by_driver for rows, _schema in s.collected.values())
    if not recorded:      # only tables collected on the driver: their count is known now
        timing.rows += collected
        if not _record(conn, records, sink_id, batch, timing.rows):
            return timing.done(by_another=True)
    for staging in by_driver:
        if temporary:
            staging.columns, _ = staging.table.stage_rows(conn, staging.collected, staging.stage, None, temporary=True)
        staging.table.apply(cursor, staging.columns, staging.stage, in_transaction_drop=not temporary)
    if recorded:
        timing.rows += collected
        records.set_rows(cursor, batch.transaction_id, timing.rows)
    try:
        batch.fence()    # a zombie driver's batch must not commit
    except BaseException:
        with contextlib.suppress(Exception):     # a session the server ended has rolled back already
            conn.rollback()
        raise
    conn.commit()
    return timing.done()


def _record(conn, records: CommitRecords, sink_id: str, batch: Batch, rows: int = 0) -> bool:
    """Insert the batch's commit record (inserted while tables still stage: its row count is set
    before COMMIT); False when another attempt committed the batch meanwhile (its insert waited
    for that one's)."""
    try:
        records.insert(conn.cursor(), batch.transaction_id, sink_id, batch.batch_id, rows)
        return True
    except Exception:
        conn.rollback()
        if records.rows_of(conn.cursor(), batch.transaction_id) is not None:
            conn.rollback()
            log.warning("batch %s was committed by another attempt meanwhile", batch.transaction_id)
            return False
        raise


def _whole_targets(by_spark: list[TargetStaging], staging: Iterator) -> Iterator[TargetStaging]:
    """Each target of ``by_spark`` once every route's staging into it has ended (``staging``
    yields each route's as it ends); closing this closes ``staging``."""
    of_stage = {s.stage: s for s in by_spark}
    try:
        for item, count in staging:
            target = of_stage[item[2]]
            target.rows += count
            target.left -= 1
            if target.left == 0:
                yield target
    finally:
        staging.close()


__all__ = ["TargetStaging", "Timing", "commit"]
