"""The Jdbc sink on the one sink protocol (plugin/sink_protocol.py): each target table one
``Target``, the targets behind one database connection applied in one transaction a batch.

A target is a table of the target database with every route (input table) that writes it; one
table is a route list of length one (target_table.py). Per batch, for the targets written through
one connection:

1. If ``seatide_sink_commits`` holds the batch's transaction id, the batch was committed by an
   earlier attempt (whose driver may have died before the runtime's own commit log heard of it):
   nothing is written, and each target says ``replayed``.
2. **Prepare**, at the first batch, rows for the target or not: its save modes through the
   protocol's door, once per job run and target (save_modes.py); before a route's first rows, its
   check that the table fits its fields; the staging tables older attempts left are dropped
   (staging.py: never a newer attempt's).
3. **Stage**: one staging table per target and batch, next to it with its column types, which
   each route's rows fill: by Spark's executors (batched JDBC writes, four tables at once), or,
   for a small micro-batch collected on the driver (``TableFrames.local``: a multi-table stream's,
   runtime.table_routing, or a single table's, collected when first asked for, runtime.local_batch,
   so the rows' types are checked first), by the driver into a temporary table made
   inside the transaction of step 4 (an ordinary one before it where the user may not create
   temporary tables). A Spark write costs ≈0.3 s whatever its rows, so 100 tables' writes were
   ≈30 s a batch; 100 temporary tables ≈0.5 s (docs/benchmarks.md). Keyed sinks stage each row's
   kind and its ``__row_seq``; keyless ones, staged by Spark, the task try that wrote each row, so
   a task Spark ran again after its rows were staged is applied once (task_tries.py).
4. **Decide and apply**, in ONE transaction: the commit record first (its primary key makes a
   racing attempt of the batch wait, then fail), then each target's staged rows by the net change
   per key, ordered by ``__row_seq`` across the routes (a target as soon as its stagings end,
   while the others still stage), ``batch.fence()`` (is this driver still the job's current
   attempt?), COMMIT (batch_transaction.py). PostgreSQL drops the staging tables inside it.

The database transaction is the batch's commit point (LocalFile's is a store decision). A zombie
driver that passes ``batch.fence()`` just before it is replaced commits the batch once, with the
rows of the offsets Spark logged for it; the replacement's replay then finds the record and writes
nothing (docs/connectors/jdbc-sink.md, "Zombie drivers"). A zombie cut off inside that transaction
holds the record until the server ends its idle session (sink_session.py), not for hours.

Several databases: a MySQL/MariaDB connection writes into every database of its server, so the
whole batch is one transaction; PostgreSQL's transactions stay within one database, so targets in
several databases are one transaction (and one record) each: a replay skips the databases that
committed and applies the others.
"""

from __future__ import annotations

import logging
import time

from seatide import failpoints
from seatide.connectors.jdbc import batch_transaction, local_rows, privileges, target_evolution
from seatide.connectors.jdbc.batch_transaction import TargetStaging
from seatide.connectors.jdbc.commit_record import CommitRecords
from seatide.connectors.jdbc.dialect import Dialect
from seatide.connectors.jdbc.named_lock import named_lock
from seatide.connectors.jdbc.sink_session import loadable_driver, lock_wait_s, open_session
from seatide.connectors.jdbc.spec import JdbcSinkSpec
from seatide.connectors.jdbc.staging import StageNames, drop_leftovers, preferred_engine, stage_engine
from seatide.connectors.jdbc.table_target import ConnectionGroup, JdbcTableTarget
from seatide.connectors.jdbc.target import JdbcTarget
from seatide.connectors.jdbc.target_names import TargetNames
from seatide.connectors.jdbc.target_table import StageColumns, TargetTable
from seatide.connectors.jdbc.temporary_tables import may_create_temporary_tables
from seatide.connectors.jdbc.url import MYSQL, POSTGRESQL
from seatide.plugin.base import Batch, SinkContext
from seatide.plugin.sink_protocol import SinkTargets, Target, TargetRows
from seatide.plugin.tables import TableRoute

log = logging.getLogger(__name__)


class JdbcTargets(SinkTargets):
    """Every target table of one Jdbc sink in one pipeline, grouped by the connection they need."""

    decided_in_store = False        # each batch commits in the target database, with its record

    def __init__(self, ctx: SinkContext, routes: list[TableRoute], multi: bool):
        self.spec: JdbcSinkSpec = routes[0].sink.spec()
        self.dialect = Dialect(self.spec.url.dialect)
        self.sink_id = f"{ctx.job_id}/{ctx.pipeline_id}/{ctx.plugin_id}"
        self.retained = ctx.checkpoints_retained
        self.attempt_fence = ctx.fence
        self.driver = loadable_driver(self.spec, ctx.spark)
        self.names = StageNames(self.sink_id)
        # MySQL: the staging tables' engine where the writer's Spark runs each task once (staging.py)
        self.stage_engine = preferred_engine(self.dialect.name, ctx.spark)
        self.groups: dict[str | None, ConnectionGroup] = {}
        self.naming = TargetNames(ctx, routes[0].sink)     # target keys, now and as earlier SeaTides spelled them
        self.save_modes_key = ""        # the sink's own (``Batch.save_modes_key``), known at ``begin``
        self.asked = False              # the privileges of every target (``_refuse_lacking``)
        super().__init__(ctx, routes, multi)
        for key in self.keys():          # every table now: shards that contradict are refused at the start
            self.target(key)

    def target_key(self, route: TableRoute) -> str:
        return self.naming.key(route)

    def previous_targets(self, state: dict) -> dict[str, dict]:
        """As the protocol's, but the flat ``{"rows"}`` state of a multi-table sink (the SeaTide
        before the port) names no table, so none counts as written (review 31 F7: a table added
        on the resume counted as written, and its save modes were never made). Each passes the
        door, where one that SeaTide prepared finds its record (``save_modes.made``) and nothing
        is destroyed again."""
        if self.multi and state and not {"targets", "tables"} & set(state):
            return {}
        return super().previous_targets(state)

    def open_target(self, key: str, routes: list[TableRoute]) -> Target:
        ways = {}
        for route in routes:
            spec = route.sink.spec()
            database, table = spec.placed() if self.multi else (spec.database, spec.table)
            way = ways[route.index] = JdbcTarget(spec, self.dialect, self._written(spec, table), self.driver,
                                                 route.name if self.multi else "", route.key, table)
            if table is None and self.dialect.name == POSTGRESQL:      # its statement's names: where its key is
                way.search_first = self.naming.schema_of(spec)
        group = self.groups.setdefault(database, ConnectionGroup(database))
        table = group.tables[key] = TargetTable(ways)
        return JdbcTableTarget(key, routes, self, group, table)

    def _written(self, spec: JdbcSinkSpec, table: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """The table as the sink writes it: on PostgreSQL an unqualified name in the schema its key
        names, resolved once (``TargetNames.schema_of``). Resolved again by each later session, it
        followed the search_path: a schema made first on it since (a role's own, for ``"$user",
        public``) took the table's rows and CREATE, beside the table the key, its save-mode decision
        and every overlap check name (outside review 8b, F10)."""
        if self.dialect.name != POSTGRESQL or table is None or len(table) > 1:
            return table
        return (self.naming.schema_of(spec), *table)

    # --- one batch ---------------------------------------------------------------------

    def begin(self, batch: Batch) -> None:
        """Where each group's commit records live, decided before its targets' save modes, which
        look there too: an earlier SeaTide kept a multi-table sink's save-mode records with them."""
        self.save_modes_key = batch.save_modes_key
        for group in self.groups.values():
            if not group.homed:
                group.home, group.homed = self._home(group, batch), True
        if not self.asked:
            self._refuse_lacking(batch)
            self.asked = True

    def _refuse_lacking(self, batch: Batch) -> None:
        """Before the first target is prepared (``begin`` precedes it): the privileges every target not yet
        written needs for its save modes and rows, asked of the server at once, so that a later table's
        missing grant refuses the sink before an earlier table is emptied or recreated (outside review, R-F)."""
        written = self.previous_targets(batch.previous_state or {})
        lines = []
        for group in self.groups.values():
            mine = [(route.spec, route.table, route.label) for key, table in group.tables.items() if key not in written
                    for route in table.routes.values() if route.table is not None]
            if mine:
                with open_session(self.spec, group.database) as conn:
                    lines += privileges.lacking_grants(conn, mine, group.home)     # homed in ``begin``
        if lines:
            raise privileges.refusal(lines)

    def check_ahead(self, frames, written: dict, others_destroy: bool = False) -> None:
        """Each route's checks that need no save mode made first (``JdbcTarget.check_ahead``), of every
        target, before the first target's save modes (or another sink's) empty or drop anything (outside
        review, #4). Where none will, each route's own check comes before its first rows, as ever."""
        if not others_destroy and not any(self.target(key).destroys
                                          for key in self.keys() if key not in written):
            return
        for group in self.groups.values():
            with open_session(self.spec, group.database) as conn:
                for key, table in group.tables.items():
                    for index, route in table.routes.items():
                        route.behaviour = route.behaviour or self.ctx.schema_changes  # as its 1st batch sees it
                        schema = frames.schema_of(index) if frames.schema_of is not None else None
                        route.check_ahead(conn.cursor(), schema, key in written)
                conn.rollback()

    def apply(self, work: dict[str, TargetRows], batch: Batch, before: dict[str, dict]) -> dict[str, dict]:
        self.names.use_attempt(batch.staging_tag)
        states: dict[str, dict] = {}
        for group in self.groups.values():
            mine = {key: rows for key, rows in work.items() if key in group.tables}
            if mine:
                states.update(self._apply_group(group, mine, batch))
                failpoints.hit("sink.table_published")     # this connection's targets committed
        return states

    def _apply_group(self, group: ConnectionGroup, work: dict[str, TargetRows], batch: Batch) -> dict[str, dict]:
        """Each target's state after the batch, applied through the group's connection."""
        with open_session(self.spec, group.database) as conn:
            self._open_records(conn, group, batch)
            done = group.records.rows_of(conn.cursor(), batch.transaction_id)
            conn.rollback()
            if done is not None:     # committed in the database, not yet in the runtime's log
                return _replayed(work, done)
            if not group.ready:
                self._drop_leftovers(conn, group)
                group.ready = True
            self._check_routes(conn, group, work)
            started = time.perf_counter()
            by_spark, by_driver = self._stage_plan(conn, group, work, batch)
            if not by_spark and not by_driver:
                return {key: {"rows": 0} for key in work}
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
                return _replayed(work, group.records.rows_of(conn.cursor(), batch.transaction_id) or 0)
        key_of = {id(table): key for key, table in group.tables.items()}
        rows = {key_of[id(s.table)]: s.rows + sum(len(r) for r, _schema in s.collected.values())
                for s in by_spark + by_driver}
        return {key: {"rows": rows.get(key, 0)} for key in work}

    def _open_records(self, conn, group: ConnectionGroup, batch: Batch) -> None:
        cursor = conn.cursor()
        if group.records is None:
            self.begin(batch)
            group.records = CommitRecords(self.dialect, group.home)
            if group.records.schema is not None:     # a database the save modes would create
                self.dialect.create_schema(cursor, group.records.schema)
            group.records.create(cursor)
            conn.commit()
        if group.database is None and group.records.schema is not None and self.dialect.name == MYSQL:
            # MariaDB resolves a multi-table DELETE's alias in the default database, so the
            # connection needs one even though every table is named with its own
            cursor.execute(f"USE {self.dialect.quote(group.records.schema)}")

    def _check_routes(self, conn, group: ConnectionGroup, work: dict[str, TargetRows]) -> None:
        """Each route's check that its table fits its fields, before its first rows."""
        for key, rows in work.items():
            for part in rows.parts:
                if part.route.index not in group.checked:
                    group.tables[key].routes[part.route.index].check(conn.cursor(), part.schema)
                    group.checked.add(part.route.index)
        conn.rollback()

    def evolve(self, changes: list, behaviour: str) -> None:
        """The source's table changes, applied to each target as ``behaviour`` says, under the
        sink's lock and the attempt's fence (target_evolution.py); the lock is taken with no
        changes too, so that a zombie inside it ends before this attempt writes anything."""
        for group in self.groups.values():
            mine = []
            for table in group.tables.values():
                for route in table.routes.values():
                    route.behaviour = behaviour
                    mine += [(route, c) for c in changes if not self.multi or route.source == c.table]
            with open_session(self.spec, group.database) as conn:
                with named_lock(conn.cursor(), self.dialect.name, f"evolve {self.sink_id}", lock_wait_s()):
                    for route, change in mine:
                        target_evolution.evolve(conn, route, change, behaviour, self.attempt_fence)

    def end_of_data(self, state: dict) -> None:
        """A bounded pipeline is done: staging tables of attempts that never committed go."""
        for group in self.groups.values():
            with open_session(self.spec, group.database) as conn:
                self._drop_leftovers(conn, group)

    # --- steps -------------------------------------------------------------------------

    def _home(self, group: ConnectionGroup, batch: Batch) -> str | None:
        """Where the group's commit records live: next to the one target of a single-table sink;
        for several tables (or a query), the connection's own database or schema, or (a MySQL URL
        without a database) the first target's database as decided once, so that no later table
        moves it. PostgreSQL's own schema is the one pinned for the run (``TargetNames.schema_of``):
        named unqualified, the records followed the search_path, and a replay after a schema was
        made first on it looked for the batch where no attempt had recorded it, and applied it again."""
        lead = next(iter(group.tables.values())).lead
        first = lead.table
        if not self.multi and first and len(first) > 1:
            return first[0]
        if self.dialect.name == POSTGRESQL:
            return self.naming.schema_of(lead.spec)
        if not self.multi or group.database:
            return None
        decided = batch.decide_once(f"{batch.save_modes_key}_commits", {"database": first[0]})
        return decided["database"]

    def _stage_plan(self, conn, group: ConnectionGroup, work: dict[str, TargetRows], batch: Batch) -> tuple[list, list]:
        """Each target with rows in the batch, staged by Spark or from rows collected on the
        driver: ([TargetStaging] with its staging table made and each route's frame to write, [TargetStaging])."""
        by_spark, by_driver = [], []
        for key, rows in work.items():
            table = group.tables[key]
            parts = {p.route.index: p for p in rows.parts}
            if not parts:
                continue
            present = {i: table.routes[i] for i in parts}
            # the rows' types first: a single table's rows are collected when first asked for (runtime.local_batch)
            collected = {i: (p.local, p.schema) for i, p in parts.items()} if rows.frames.local is not None and \
                all(local_rows.columns(present[i], p.schema) is not None for i, p in parts.items()) else {}
            if collected and all(local is not None for local, _schema in collected.values()):
                by_driver.append(TargetStaging(table, None, (), collected=collected))
                continue
            dfs = {i: r.rename(parts[i].frame) for i, r in present.items()}
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

    def _stage_collected_before(self, conn, group: ConnectionGroup, by_driver: list, batch: Batch) -> None:
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

    def _drop_leftovers(self, conn, group: ConnectionGroup) -> None:
        """Drop the staging tables this attempt and older ones left (never a newer attempt's)."""
        drop_leftovers(conn, self.dialect, {t.stage_schema for t in group.tables.values()}, self.names)

    def _prune(self, conn, group: ConnectionGroup, batch: Batch) -> None:
        group.records.prune(conn.cursor(), self.sink_id, _lineage(batch), batch.batch_id - self.retained)
        conn.commit()


def _replayed(work: dict[str, TargetRows], rows: int) -> dict[str, dict]:
    """The states of targets whose batch an earlier attempt committed: its rows, counted once."""
    keys = list(work)
    return {key: {"rows": rows if i == 0 else 0, "replayed": True} for i, key in enumerate(keys)}


def _lineage(batch: Batch) -> str:
    """The transaction id without its batch number: one run of the pipeline's checkpoint."""
    suffix = f"_{batch.batch_id}"
    return batch.transaction_id[:-len(suffix)] if batch.transaction_id.endswith(suffix) else batch.transaction_id


__all__ = ["JdbcTableTarget", "JdbcTargets"]
