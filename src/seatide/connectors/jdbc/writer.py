"""The Jdbc sink's writer: one micro-batch, committed exactly once in one database transaction.

Protocol for one batch:

1. If ``seatide_sink_commits`` holds the batch's transaction id, the batch was committed
   by an earlier attempt (whose driver may have died before the runtime's own commit log
   heard of it): nothing is written.
2. Before the sink's first batch ever: the save modes (create, recreate, empty the table...).
3. Spark's executors append the batch to a staging table of this attempt's own
   (``seatide_stage_<sink>_<batch>_<attempt>``, next to the target, with the target's column
   types), with Spark's batched JDBC writer; keyed sinks add each row's kind and a sequence
   number that orders changes to one key. A small micro-batch of a multi-table stream comes
   already collected on the driver (``TableFrames.local``, runtime.table_routing): its tables
   are staged by the driver instead, into temporary tables made inside the transaction of step
   4 (executemany), with no Spark job; a table whose types only Spark stages (arrays) still
   goes through Spark. A Spark write costs ≈0.3 s whatever the rows, so 100 tables' writes
   were ≈30 s a batch; 100 temporary tables ≈0.5 s (docs/benchmarks.md).
4. The driver, in ONE transaction: inserts the commit record (its primary key makes a
   racing attempt of the same batch wait, then fail), applies the staged rows to the target
   set-wise, asks ``batch.fence()`` whether this driver is still the job's current attempt,
   and commits. The staging table is dropped with it (PostgreSQL: inside the transaction).

Staging tables of attempts that never committed are never applied; each commit drops every
staging table the sink has left (a zombie still staging into one then fails).

The database transaction is the batch's commit point (LocalFile's is a store decision, see
``runtime.commit_log``). A zombie driver that passes ``batch.fence()`` just before it is
replaced commits the batch once, with the rows of the offsets Spark logged for it; the
replacement's replay then finds the record and writes nothing. No store decision could
close that window (the database cannot make its commit depend on the store); see
docs/connectors/jdbc-sink.md, "Zombie drivers".

Several tables (a multi-table input, docs/design/multi-table.md): every target table is a
``JdbcTarget``; the batch stages each table that has rows, then applies them all and inserts
ONE commit record in one transaction. A MySQL/MariaDB connection writes into every database
of its server, so that is one transaction for the whole batch; PostgreSQL's transactions
stay within one database, so targets in several databases are one transaction (and one
record) each: a replay skips the databases that committed and applies the others. Each
table's save modes are made once per run under its own record.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from typing import Iterator

from seatide.connectors.jdbc.commit_record import CommitRecords
from seatide.connectors.jdbc.dialect import STAGE_ENGINE, Dialect
from seatide.connectors.jdbc.sink import JdbcSinkSpec
from seatide.connectors.jdbc.target import SAVE_MODES_WAIT_S, JdbcSinkError, JdbcTarget
from seatide.connectors.jdbc.url import MYSQL, POSTGRESQL
from seatide.plugin.base import Batch, SinkContext, SinkWriter
from seatide.plugin.rowkind import HIDDEN_COLUMNS
from seatide.plugin.tables import TableFrames, TableRoute

log = logging.getLogger(__name__)


@dataclass
class _Group:
    """The targets written through one connection, in one transaction per batch."""

    database: str | None                          # the database connected to (None: the URL's)
    targets: dict[int, JdbcTarget] = field(default_factory=dict)    # route index -> target
    ready: bool = False                           # commit table made, save modes made, targets checked
    records: CommitRecords | None = None


class JdbcWriter(SinkWriter):
    def __init__(self, spec: JdbcSinkSpec, ctx: SinkContext, routes: list[TableRoute] | None = None):
        self.spec = spec
        self.dialect = Dialect(spec.url.dialect)
        self.sink_id = f"{ctx.job_id}/{ctx.pipeline_id}/{ctx.plugin_id}"
        self.retained = ctx.checkpoints_retained
        self.driver = self._loadable_driver(ctx.spark)
        self.multi = routes is not None
        prefix = f"seatide_stage_{hashlib.sha1(self.sink_id.encode()).hexdigest()[:12]}_"
        self.groups: dict[str | None, _Group] = {}
        if routes is None:
            self._group(spec.database).targets[0] = JdbcTarget(spec, self.dialect, spec.table, self.driver, prefix)
        for route in routes or []:
            table_spec = route.sink.spec()
            database, table = self._placed(table_spec)
            self._group(database).targets[route.index] = JdbcTarget(table_spec, self.dialect, table, self.driver,
                                                                    prefix, route.name, route.key)
        engine = STAGE_ENGINE if self.dialect.name == MYSQL and _runs_each_task_once(ctx.spark) else None
        for group in self.groups.values():
            for target in group.targets.values():
                target.stage_engine = engine

    @classmethod
    def for_routes(cls, routes: list[TableRoute], ctx: SinkContext) -> "JdbcWriter":
        return cls(routes[0].sink.spec(), ctx, routes)

    def _group(self, database: str | None) -> _Group:
        return self.groups.setdefault(database, _Group(database))

    def _placed(self, spec: JdbcSinkSpec) -> tuple[str | None, tuple[str, ...]]:
        """(database to connect to, the table as named through that connection) of one table.
        MySQL/MariaDB: one connection to the URL's database, every table named with its own
        database; PostgreSQL: a connection per database, tables named by schema."""
        if self.dialect.name == MYSQL:
            table = spec.table if len(spec.table) > 1 or not spec.database else (spec.database, *spec.table)
            return self.spec.url.database, table
        return spec.database, spec.table

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
        done, rows = 0, 0
        for group in self.groups.values():
            committed, staged = self._write_group(group, frames, batch)
            done, rows = done + committed, rows + staged
        return {"rows": rows + done, "replayed": True} if done and not rows else {"rows": rows + done}

    def _write_group(self, group: _Group, frames: TableFrames, batch: Batch) -> tuple[int, int]:
        """(rows an earlier attempt committed, rows staged and committed now) of one group."""
        with self._connection(group.database) as conn:
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
                self._drop_stages(conn, group)     # what crashed attempts left
                group.ready = True
                log.info("Jdbc sink %s: %d table(s) checked and their save modes made in %.2f s", self.sink_id,
                         len(group.targets), time.perf_counter() - started)
            present = [(i, t) for i, t in group.targets.items() if i in frames.frames]
            if not present:
                return 0, 0
            started = time.perf_counter()
            to_stage, local = [], []
            for index, target in present:
                rows_here = frames.local.get(index) if frames.local is not None else None
                if rows_here is not None and target.local_columns(frames.schema_of(index)) is not None:
                    local.append((target, rows_here, frames.schema_of(index)))
                    continue
                df = target.rename(frames.frames[index])
                stage = target.new_stage(batch.batch_id)
                target.create_stage(conn, df, stage)
                to_stage.append((target, df, stage))
            timing = self._commit(conn, group, batch, _stage_all(to_stage, self.spec.url.for_spark(group.database)),
                                  local)
            self._drop_stages(conn, group)
            self._prune(conn, group, batch)
            log.info("Jdbc sink %s: batch %s, %d rows of %d table(s) (%d collected on the driver) staged in "
                     "%.2f s, each applied as its staging ended, committed %.2f s after the last", self.sink_id,
                     batch.batch_id, timing.rows, len(to_stage) + len(local), len(local),
                     timing.staged - started, timing.committed - timing.staged)
            if timing.by_another:
                return group.records.rows_of(conn.cursor(), batch.transaction_id) or 0, 0
        return 0, timing.rows

    def evolve(self, changes: list, behaviour: str) -> None:
        """The source's table changes, applied to each target as ``behaviour`` says (target.py)."""
        for group in self.groups.values():
            for target in group.targets.values():
                target.behaviour = behaviour
            mine = [(t, c) for c in changes for t in group.targets.values() if not self.multi or t.source == c.table]
            if not mine:
                continue
            with self._connection(group.database) as conn:
                for target, change in mine:
                    target.evolve(conn, change, behaviour)

    def end_of_data(self, state: dict) -> None:
        """A bounded pipeline is done: staging tables of attempts that never committed go."""
        for group in self.groups.values():
            with self._connection(group.database) as conn:
                self._drop_stages(conn, group)

    # --- steps -------------------------------------------------------------------------

    def _home(self, group: _Group, batch: Batch) -> str | None:
        """Where the group's commit records live: next to the one target of a single-table sink;
        for several tables, the connection's own database or schema, or (a MySQL URL without a
        database) the first target's database as decided once, so that no later table moves it."""
        if not self.multi:
            table = group.targets[0].table
            return table[0] if table and len(table) > 1 else None
        if self.dialect.name == POSTGRESQL or group.database:
            return None
        first = next(iter(group.targets.values())).table
        decided = batch.decide_once(f"{batch.save_modes_key}_commits", {"database": first[0]})
        return decided["database"]

    def _prepare(self, conn, group: _Group, frames: TableFrames, batch: Batch) -> None:
        """Save modes and checks of every target of the group, before its first batch."""
        for index, target in group.targets.items():
            if self.multi:
                key = f"{batch.save_modes_key}_{target.key}"
            else:
                # A branch that has committed batches (under a SeaTide that kept no save-mode
                # record) made its save modes before them.
                first = not group.records.any_for(conn.cursor(), self.sink_id, _lineage(batch))
                key = batch.save_modes_key if first else None
            target.prepare(conn, frames.schema_of(index), key, group.records, self.sink_id)

    def _commit(self, conn, group: _Group, batch: Batch, staging: Iterator, local: list) -> "_Timing":
        """The batch's one transaction: its record, every table's staged rows applied, the fence.
        ``staging`` yields each (target, frame, staging table) with its row count as Spark's
        executors finish staging it: from the first one on, the transaction is open (its record
        inserted first makes a racing attempt of the batch wait) and each table's rows are applied
        as they come, while the others are still staging. ``local``: (target, rows, schema)
        collected on the driver, staged here into temporary tables of this transaction
        (target.stage_local)."""
        cursor = conn.cursor()
        timing = _Timing()
        recorded = False
        try:
            for (target, df, stage), count in staging:
                if not recorded:
                    if not self._record(conn, group, batch):
                        return timing.done(by_another=True)
                    recorded = True
                quoted = self.dialect.qualified(stage)
                for statement in target.apply_statements([c for c in df.columns if c not in HIDDEN_COLUMNS], quoted):
                    cursor.execute(statement)   # no parameters: neither client then reads % in the SQL as a placeholder
                if self.dialect.name == POSTGRESQL:   # DDL is transactional there; MySQL's DROP would commit
                    cursor.execute(f"DROP TABLE {quoted}")
                timing.rows += count
        finally:
            staging.close()      # after an error: no more tables start staging; those staging end
        timing.staged = time.perf_counter()
        if not recorded:      # only tables collected on the driver: their count is known now
            timing.rows += sum(len(collected) for _target, collected, _schema in local)
            if not self._record(conn, group, batch, timing.rows):
                return timing.done(by_another=True)
        for target, collected, schema in local:
            stage = target.new_local_stage(batch.batch_id)
            columns = target.stage_local(conn, collected, schema, stage)
            for statement in target.apply_statements(columns, self.dialect.qualified(stage)):
                cursor.execute(statement)
            if recorded:
                timing.rows += len(collected)
        if recorded:
            group.records.set_rows(cursor, batch.transaction_id, timing.rows)
        try:
            batch.fence()    # a zombie driver's batch must not commit
        except BaseException:
            conn.rollback()
            raise
        conn.commit()
        return timing.done()

    def _record(self, conn, group: _Group, batch: Batch, rows: int = 0) -> bool:
        """Insert the batch's commit record (inserted while tables still stage: its row count is
        set before COMMIT); False when another attempt committed the batch meanwhile (its insert
        waited for that one's)."""
        try:
            group.records.insert(conn.cursor(), batch.transaction_id, self.sink_id, batch.batch_id, rows)
            return True
        except Exception:
            conn.rollback()
            if group.records.rows_of(conn.cursor(), batch.transaction_id) is not None:
                conn.rollback()
                log.warning("batch %s was committed by another attempt meanwhile", batch.transaction_id)
                return False
            raise

    def _drop_stages(self, conn, group: _Group) -> None:
        """Drop every staging table this sink has left (attempts that crashed or were replaced)."""
        cursor = conn.cursor()
        prefix = next(iter(group.targets.values())).stage_prefix
        current = "current_schema()" if self.dialect.name == POSTGRESQL else "DATABASE()"
        for schema in sorted({t.stage_schema for t in group.targets.values()}):
            cursor.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = "
                           + ("%s" if schema else current), schema or None)
            for (name,) in cursor.fetchall():
                if name.startswith(prefix):
                    cursor.execute(f"DROP TABLE IF EXISTS {self.dialect.qualified((*schema, name))}")
        conn.commit()

    def _prune(self, conn, group: _Group, batch: Batch) -> None:
        group.records.prune(conn.cursor(), self.sink_id, _lineage(batch), batch.batch_id - self.retained)
        conn.commit()

    # --- housekeeping ------------------------------------------------------------------

    def _connection(self, database: str | None):
        spec = self.spec
        conn = spec.url.connect(spec.user, spec.password, database=database,
                                connect_timeout=spec.connect_timeout)
        return _Closing(conn)


# Spark JDBC writes staged at once when a batch holds several tables: each costs about 0.3 s
# whatever its rows (planning, a connection, the commit: DESIGN.md §10), mostly waiting, so a
# few overlap well on two cores. Every staging table is this attempt's own, and nothing is
# applied until all are staged: the order they fill in changes nothing.
STAGE_WRITERS = 4


def _stage_all(work: list, url: str) -> Iterator[tuple[tuple, int]]:
    """Stage each (target, frame, staging table); yield each with its row count as its staging
    ends. Closing the generator early cancels the tables not started and waits for the others."""
    if len(work) <= 1:
        for target, df, stage in work:
            yield (target, df, stage), target.stage(df, stage, url)
        return
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from pyspark.util import inheritable_thread_target

    # The writers' jobs carry this thread's job group, so stopping the pipeline cancels them too
    # (given the session, the wrapper takes its tags as well, and says nothing).
    session = work[0][1].sparkSession
    stage_one = inheritable_thread_target(session)(lambda item: item[0].stage(item[1], item[2], url))
    pool = ThreadPoolExecutor(max_workers=min(STAGE_WRITERS, len(work)), thread_name_prefix="jdbc-stage")
    try:
        futures = {pool.submit(stage_one, item): item for item in work}
        for future in as_completed(futures):
            yield futures[future], future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@dataclass
class _Timing:
    """What a batch's commit reports for the log."""

    rows: int = 0
    staged: float = 0.0       # perf_counter when the last table's staging was applied
    committed: float = 0.0
    by_another: bool = False  # another attempt committed the batch meanwhile: nothing applied

    def done(self, by_another: bool = False) -> "_Timing":
        self.by_another = by_another
        self.committed = time.perf_counter()
        self.staged = self.staged or self.committed
        return self


def _runs_each_task_once(spark) -> bool:
    from seatide.runtime.session import runs_each_task_once

    if spark is None:
        return False
    conf = spark.sparkContext.getConf()
    return runs_each_task_once(spark.sparkContext.master, conf.get("spark.speculation", "false"))


def _jvm_has_class(spark, name: str) -> bool:
    try:
        spark.sparkContext._jvm.java.lang.Class.forName(name)
        return True
    except Exception:
        return False


class _Closing:
    """Closes a DB-API connection on exit, rolling back what was not committed."""

    def __init__(self, conn):
        self.conn = conn

    def __enter__(self):
        return self.conn

    def __exit__(self, *exc):
        try:
            self.conn.rollback()
        finally:
            self.conn.close()
        return False


def _lineage(batch: Batch) -> str:
    """The transaction id without its batch number: one run of the pipeline's checkpoint."""
    suffix = f"_{batch.batch_id}"
    return batch.transaction_id[:-len(suffix)] if batch.transaction_id.endswith(suffix) else batch.transaction_id


__all__ = ["JdbcSinkError", "JdbcWriter", "SAVE_MODES_WAIT_S"]
