"""The Jdbc sink's writer: one micro-batch, committed exactly once in one database transaction.

Protocol for one batch, target by target (target_table.py: a target table with every input
table, or route, that writes it; one table is a route list of length one):

1. If ``seatide_sink_commits`` holds the batch's transaction id, the batch was committed by an
   earlier attempt (whose driver may have died before the runtime's own commit log heard of it):
   nothing is written.
2. **Prepare**, before the writer's first batch: each target's save modes, once per target under
   its record (save_modes.py), then each route's check; and the staging tables older attempts
   left are dropped (staging.py: never a newer attempt's).
3. **Stage**: one staging table per target and batch, next to it with its column types, which
   each route's rows fill: by Spark's executors (batched JDBC writes, four tables at once), or,
   for a small micro-batch of a multi-table stream already collected on the driver
   (``TableFrames.local``, runtime.table_routing), by the driver into a temporary table made
   inside the transaction of step 4 (an ordinary one before it where the user may not create
   temporary tables). A Spark write costs ≈0.3 s whatever its rows, so 100 tables' writes were
   ≈30 s a batch; 100 temporary tables ≈0.5 s (docs/benchmarks.md). Keyed sinks stage each row's
   kind and its ``__row_seq``; keyless ones, staged by Spark, the task try that wrote each row, so
   a task Spark ran again after its rows were staged is applied once (task_tries.py).
4. **Decide and apply**, in ONE transaction: the commit record first (its primary key makes a
   racing attempt of the batch wait, then fail), then each target's staged rows by the net change
   per key, ordered by ``__row_seq`` across the routes (a target as soon as its stagings end,
   while the others still stage), ``batch.fence()`` (is this driver still the job's current
   attempt?), COMMIT. PostgreSQL drops the staging tables inside the transaction.

The database transaction is the batch's commit point (LocalFile's is a store decision, see
``runtime.commit_log``). A zombie driver that passes ``batch.fence()`` just before it is replaced
commits the batch once, with the rows of the offsets Spark logged for it; the replacement's replay
then finds the record and writes nothing (docs/connectors/jdbc-sink.md, "Zombie drivers"). A
zombie cut off inside that transaction holds the record until the server ends its idle session
(sink_session.py), not for hours.

Several databases: a MySQL/MariaDB connection writes into every database of its server, so the
whole batch is one transaction; PostgreSQL's transactions stay within one database, so targets in
several databases are one transaction (and one record) each: a replay skips the databases that
committed and applies the others.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Iterator

from seatide.connectors.jdbc import batch_transaction, local_rows, target_evolution
from seatide.connectors.jdbc.batch_transaction import TargetStaging
from seatide.connectors.jdbc.commit_record import CommitRecords
from seatide.connectors.jdbc.dialect import Dialect
from seatide.connectors.jdbc.named_lock import named_lock
from seatide.connectors.jdbc.save_modes import prepare_once
from seatide.connectors.jdbc.sink_session import lock_wait_s, open_session
from seatide.connectors.jdbc.spec import JdbcSinkError, JdbcSinkSpec
from seatide.connectors.jdbc.staging import StageNames, drop_leftovers, preferred_engine, stage_engine
from seatide.connectors.jdbc.target import JdbcTarget
from seatide.connectors.jdbc.target_table import StageColumns, TargetTable
from seatide.connectors.jdbc.temporary_tables import may_create_temporary_tables
from seatide.connectors.jdbc.url import MYSQL, POSTGRESQL
from seatide.plugin.base import Batch, SinkContext, SinkWriter
from seatide.plugin.tables import TableFrames, TableRoute

log = logging.getLogger(__name__)


@dataclass
class _Group:
    """The targets written through one connection, in one transaction per batch."""

    database: str | None                          # the database connected to (None: the URL's)
    tables: dict[object, TargetTable] = field(default_factory=dict)     # target table -> it
    ready: bool = False                           # commit table made, save modes made, targets checked
    records: CommitRecords | None = None
    temporary: bool | None = None                 # whether the user may create temporary tables

    def routes(self) -> Iterator[tuple[int, JdbcTarget]]:
        for table in self.tables.values():
            yield from table.routes.items()


class JdbcWriter(SinkWriter):
    def __init__(self, spec: JdbcSinkSpec, ctx: SinkContext, routes: list[TableRoute] | None = None):
        self.spec = spec
        self.dialect = Dialect(spec.url.dialect)
        self.sink_id = f"{ctx.job_id}/{ctx.pipeline_id}/{ctx.plugin_id}"
        self.retained = ctx.checkpoints_retained
        self.fence = ctx.fence
        self.driver = self._loadable_driver(ctx.spark)
        self.multi = routes is not None
        self.names = StageNames(self.sink_id)
        # MySQL: the staging tables' engine where the writer's Spark runs each task once (staging.py)
        self.stage_engine = preferred_engine(self.dialect.name, ctx.spark)
        self.groups: dict[str | None, _Group] = {}
        placed = [(0, spec, spec.database, spec.table, "", "")] if routes is None else \
            [(r.index, r.sink.spec(), *r.sink.spec().placed(), r.name, r.key) for r in routes]
        by_table: dict[tuple, dict[int, JdbcTarget]] = {}
        for index, table_spec, database, table, source, key in placed:
            route = JdbcTarget(table_spec, self.dialect, table, self.driver, source, key)
            by_table.setdefault((database, table), {})[index] = route
        for (database, table), table_routes in by_table.items():
            self.groups.setdefault(database, _Group(database)).tables[table] = TargetTable(table_routes)

    @classmethod
    def for_routes(cls, routes: list[TableRoute], ctx: SinkContext) -> "JdbcWriter":
        return cls(routes[0].sink.spec(), ctx, routes)

    def _loadable_driver(self, spark) -> str:
        """The ``driver`` class (MySQL's Connector/J names stand for the bundled MariaDB driver)."""
        driver = self.spec.driver       # already resolved by the sink (url.driver_class)
        if spark is None or _jvm_has_class(spark, driver):
            return driver
        raise JdbcSinkError(f"Jdbc sink: option 'driver': class {driver} is not on the class path; use "
                            f"{self.spec.url.default_driver} or add the driver's jar to SeaTide's JDBC jars")

    # --- one batch ---------------------------------------------------------------------

    def write_batch(self, df, batch: Batch) -> dict:
        frames = df if isinstance(df, TableFrames) else TableFrames({0: df}, schema_of=lambda _i: df.schema)
        self.names.use_attempt(batch.staging_tag)
        done, rows = 0, 0
        for group in self.groups.values():
            committed, staged = self._write_group(group, frames, batch)
            done, rows = done + committed, rows + staged
        return {"rows": rows + done, "replayed": True} if done and not rows else {"rows": rows + done}

    def _write_group(self, group: _Group, frames: TableFrames, batch: Batch) -> tuple[int, int]:
        """(rows an earlier attempt committed, rows staged and committed now) of one group."""
        with open_session(self.spec, group.database) as conn:
            cursor = conn.cursor()
            if group.records is None:
                group.records = CommitRecords(self.dialect, self._home(group, batch))
                if group.records.schema is not None:     # a database the save modes would create
                    self.dialect.create_schema(cursor, group.records.schema)
                group.records.create(cursor)
                conn.commit()
            if group.database is None and group.records.schema is not None and self.dialect.name == MYSQL:
                # MariaDB resolves a multi-table DELETE's alias in the default database, so the
                # connection needs one even though every table is named with its own
                cursor.execute(f"USE {self.dialect.quote(group.records.schema)}")
            done = group.records.rows_of(cursor, batch.transaction_id)
            conn.rollback()
            if done is not None:     # committed in the database, not yet in the runtime's log
                return done, 0
            if not group.ready:
                started = time.perf_counter()
                self._prepare(conn, group, frames, batch)
                self._drop_leftovers(conn, group)
                group.ready = True
                log.info("Jdbc sink %s: %d table(s) checked and their save modes made in %.2f s", self.sink_id,
                         len(group.tables), time.perf_counter() - started)
            started = time.perf_counter()
            by_spark, by_driver = self._stage_plan(conn, group, frames, batch)
            if not by_spark and not by_driver:
                return 0, 0
            timing = batch_transaction.commit(conn, group.records, self.sink_id, batch,
                                              self.spec.url.for_spark(group.database), by_spark, by_driver,
                                              bool(group.temporary))
            self._drop_leftovers(conn, group)
            self._prune(conn, group, batch)
            log.info("Jdbc sink %s: batch %s, %d rows of %d table(s) (%d collected on the driver) staged in "
                     "%.2f s, each applied as its staging ended, committed %.2f s after the last", self.sink_id,
                     batch.batch_id, timing.rows, len(by_spark) + len(by_driver), len(by_driver),
                     timing.staged - started, timing.committed - timing.staged)
            if timing.by_another:
                return group.records.rows_of(conn.cursor(), batch.transaction_id) or 0, 0
        return 0, timing.rows

    def evolve(self, changes: list, behaviour: str) -> None:
        """The source's table changes, applied to each target as ``behaviour`` says, under the
        sink's lock and the attempt's fence (target_evolution.py); the lock is taken with no
        changes too, so that a zombie inside it ends before this attempt writes anything."""
        for group in self.groups.values():
            mine = []
            for _index, route in group.routes():
                route.behaviour = behaviour
                mine += [(route, c) for c in changes if not self.multi or route.source == c.table]
            with open_session(self.spec, group.database) as conn:
                with named_lock(conn.cursor(), self.dialect.name, f"evolve {self.sink_id}", lock_wait_s()):
                    for route, change in mine:
                        target_evolution.evolve(conn, route, change, behaviour, self.fence)

    def end_of_data(self, state: dict) -> None:
        """A bounded pipeline is done: staging tables of attempts that never committed go."""
        for group in self.groups.values():
            with open_session(self.spec, group.database) as conn:
                self._drop_leftovers(conn, group)

    # --- steps -------------------------------------------------------------------------

    def _home(self, group: _Group, batch: Batch) -> str | None:
        """Where the group's commit records live: next to the one target of a single-table sink;
        for several tables, the connection's own database or schema, or (a MySQL URL without a
        database) the first target's database as decided once, so that no later table moves it."""
        first = next(iter(group.tables.values())).lead.table
        if not self.multi:
            return first[0] if first and len(first) > 1 else None
        if self.dialect.name == POSTGRESQL or group.database:
            return None
        decided = batch.decide_once(f"{batch.save_modes_key}_commits", {"database": first[0]})
        return decided["database"]

    def _prepare(self, conn, group: _Group, frames: TableFrames, batch: Batch) -> None:
        """Each target's save modes, once per target for the whole job (save_modes.py), and each
        route's checks. The record is the job's for the target (``Batch.target_save_modes_key``):
        another sink or pipeline of the job that made them first has committed rows into the table
        since, which a second DROP_DATA would delete. Records this sink kept under its own key
        (before the job's) count too."""
        for table in group.tables.values():
            if table.lead.table is not None:
                record = batch.target_save_modes_key(self._identity(group, table))
                if self.multi:
                    earlier = (f"{batch.save_modes_key}_{table.key}",
                               *(f"{batch.save_modes_key}_{r.key}" for r in table.routes.values()))
                else:
                    # A branch that has committed batches (under a SeaTide that kept no save-mode
                    # record) made its save modes before them.
                    first = not group.records.any_for(conn.cursor(), self.sink_id, _lineage(batch))
                    record, earlier = (record if first else None), (batch.save_modes_key,)
                lead_index = next(iter(table.routes))
                if record is not None:
                    prepare_once(conn, table.lead, frames.schema_of(lead_index), record, earlier, group.records,
                                 self.sink_id)
            for index, route in table.routes.items():
                route.check(conn.cursor(), frames.schema_of(index))
            conn.rollback()

    def _identity(self, group: _Group, table: TargetTable) -> str:
        """The target table as every sink of the job names it: server, database and table."""
        url = self.spec.url
        return f"jdbc:{url.dialect}://{url.host.lower()}:{url.port}/{group.database or ''}/{table.label}"

    def _stage_plan(self, conn, group: _Group, frames: TableFrames, batch: Batch) -> tuple[list, list]:
        """Each target with rows in the batch, staged by Spark or from rows collected on the
        driver: ([TargetStaging] with its staging table made and each route's frame to write, [TargetStaging])."""
        by_spark, by_driver = [], []
        for table in group.tables.values():
            present = {i: r for i, r in table.routes.items() if i in frames.frames}
            if not present:
                continue
            collected = {i: (frames.local.get(i), frames.schema_of(i)) for i in present} \
                if frames.local is not None else {}
            if collected and all(rows is not None and local_rows.columns(present[i], schema) is not None
                                 for i, (rows, schema) in collected.items()):
                by_driver.append(TargetStaging(table, None, (), collected=collected))
                continue
            dfs = {i: r.rename(frames.frames[i]) for i, r in present.items()}
            # Spark may run a task again after its rows were staged: a keyless target's rows carry the try
            columns = StageColumns.of({i: df.columns for i, df in dfs.items()}, tried=not table.keyed)
            staging = TargetStaging(table, columns, self.names.new(table.stage_schema, batch.batch_id), left=len(dfs))
            wanted = stage_engine(self.stage_engine, table.keyed, list(dfs.values()))
            made = table.create_stage(conn, columns, staging.stage, wanted, df=next(iter(dfs.values())))
            if wanted and not made:
                self.stage_engine = None         # refused: the server's default for every later batch
            staging.spark = [(present[i], df, staging.stage, columns.of_route[i]) for i, df in dfs.items()]
            by_spark.append(staging)
        if by_driver:
            self._stage_collected_before(conn, group, by_driver, batch)
        return by_spark, by_driver

    def _stage_collected_before(self, conn, group: _Group, by_driver: list, batch: Batch) -> None:
        """Where the user may not create temporary tables, rows collected on the driver are
        staged into ordinary tables now, before the transaction (see target_table.stage_rows)."""
        if group.temporary is None:
            where = by_driver[0].table.stage_schema
            group.temporary = may_create_temporary_tables(conn, self.dialect, where, self.spec.user, self.sink_id)
        for staging in by_driver:
            table = staging.table
            staging.stage = self.names.new(table.stage_schema, batch.batch_id)
            if group.temporary:
                if self.dialect.name == POSTGRESQL:       # its temporary tables live in a schema of their own
                    staging.stage = staging.stage[-1:]
                continue
            staging.columns, made = table.stage_rows(conn, staging.collected, staging.stage, self.stage_engine,
                                                     temporary=False)
            if self.stage_engine and not made:
                self.stage_engine = None

    def _drop_leftovers(self, conn, group: _Group) -> None:
        """Drop the staging tables this attempt and older ones left (never a newer attempt's)."""
        drop_leftovers(conn, self.dialect, {t.stage_schema for t in group.tables.values()}, self.names)

    def _prune(self, conn, group: _Group, batch: Batch) -> None:
        group.records.prune(conn.cursor(), self.sink_id, _lineage(batch), batch.batch_id - self.retained)
        conn.commit()


def _jvm_has_class(spark, name: str) -> bool:
    try:
        spark.sparkContext._jvm.java.lang.Class.forName(name)
        return True
    except Exception:
        return False


def _lineage(batch: Batch) -> str:
    """The transaction id without its batch number: one run of the pipeline's checkpoint."""
    suffix = f"_{batch.batch_id}"
    return batch.transaction_id[:-len(suffix)] if batch.transaction_id.endswith(suffix) else batch.transaction_id


__all__ = ["JdbcSinkError", "JdbcWriter"]
