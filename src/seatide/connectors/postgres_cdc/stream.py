"""The Spark streaming reader of Postgres-CDC: snapshot splits first, then the slot's changes.

Offsets are JSON:

* ``lsn`` — the stream's position: the end of the last commit admitted (at first the
  slot's consistent point; null in the initial offset, before the slot exists). Changes of
  transactions ending after it are still to come.
* ``snapshot`` — ``{"table": i, "after": key}`` while the snapshot runs (the next split of
  table ``i`` starts after ``key``), null once every table is read.
* ``splits`` — the snapshot splits of the batch ending at this offset, so that a replayed
  batch reads exactly the same key ranges (the rows are read again, see the docs page).
* ``export`` — while the snapshot runs: the snapshot the slot exported, which the splits read.
* ``changes`` — how many rows the changes of the batch ending here make at most (0: none,
  the batch only moves the position).
* ``bytes`` — about how many bytes their values take (their pgoutput messages'); with
  ``lookups`` (an UPDATE left a value out, read by key when the batch is read), only the least.
* ``tables`` — the tables the position covers (``schema.table``), in the order the snapshot
  reads them; ``snapshot.table`` counts in it. Splits name their table.
* ``backfill`` — while tables added to ``table-names`` of a resumed job are snapshotted:
  ``{"tables": [...], "table": i, "after": key, "lsn": point, "export": snapshot}``, the
  snapshot of a temporary slot created after the publication took them in, read as of its
  consistent ``point`` while ``lsn`` stays where the other tables are.
* ``since`` — ``{table: point}`` for tables added so: their changes are read only from
  transactions whose commit starts at or after ``point`` (the earlier ones are in their
  snapshot); an entry goes once ``lsn`` has passed it.

An offset without ``tables`` (written before tables could be added) covers the tables the
pipeline last ran with (``legacy_tables`` of the config), splits then count in that list.

The reader runs in a Python process Spark keeps beside the driver. Planning the first
batch of a query without a checkpoint creates the publication and the slot (not
``initialOffset``: Spark calls it again to replay a first batch that never committed).
Planning a change batch streams the slot from the batch's start to find its end
(``changes.plan_batch``); the task reading it gets the planned messages of a small batch,
or streams the same range again. ``commit(end)`` — Spark's word that every batch up to
``end`` is committed — is the only place the slot moves.
"""

from __future__ import annotations

import json
from typing import Iterator

from psycopg import errors
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from seatide.connectors.cdc_way_out import START_OVER
from seatide.connectors.postgres_cdc import holder, ownership, replication, slot
from seatide.connectors.postgres_cdc.changes import EVERY_TABLE, Admitted, plan_batch, read_changes
from seatide.connectors.postgres_cdc.membership import TableGone, check_published, table_dropped
from seatide.connectors.postgres_cdc.row_batches import RowBatches
from seatide.connectors.postgres_cdc.tables import CapturedTable, next_boundary, page_query
from seatide.connectors.postgres_cdc.unchanged import with_unchanged_values
from seatide.connectors.postgres_cdc.values import FAIL
from seatide.plugin.base import permanent_in_worker
from seatide.plugin.rowkind import PARTITION_SEQ_STRIDE, RowKind
from seatide.plugin.tables import TableLayout

SOURCE_NAME = "seatide_postgres_cdc"
# WAL without changes for us after which an idle stream moves its position (one empty batch).
IDLE_ADVANCE_BYTES = 16 << 20


def connect(config: dict, autocommit: bool = True):
    import psycopg

    conn = psycopg.connect(host=config["host"], port=config["port"], dbname=config["database"],
                           user=config["user"], password=config["password"] or None,
                           connect_timeout=max(1, config["connect_timeout_ms"] // 1000),
                           application_name=holder.application_name(config), autocommit=autocommit)
    settings = replication.session_settings(config)     # the replication connection's too
    conn.execute("SELECT " + ", ".join("set_config(%s, %s, false)" for _ in settings),
                 [v for item in settings.items() for v in item])
    return conn


class SnapshotSplit(InputPartition):
    """Rows of table ``table`` with key in ``(after, upto]``, as of the snapshot ``export`` (the
    one the slot exported at its consistent point; None: as of now). Its rows are numbered from
    ``first_seq`` on."""

    def __init__(self, table: int, after: list | None, upto: list | None, export: str | None = None,
                 first_seq: int = 0):
        super().__init__((table, after, upto))
        self.table, self.after, self.upto, self.export = table, after, upto, export
        self.first_seq = first_seq


class ChangeRange(InputPartition):
    """The changes of the transactions committed in ``(start, end]``, read by one task: from
    ``messages`` when the plan kept them (a small batch), else streamed again."""

    def __init__(self, start: int, end: int, messages: list | None = None, admitted: Admitted = EVERY_TABLE):
        super().__init__((start, end))
        self.start, self.end, self.messages, self.admitted = start, end, messages, admitted


class PostgresCdcSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def streamReader(self, schema) -> "PostgresCdcReader":
        return PostgresCdcReader(json.loads(self.options["config"]))


class PostgresCdcReader(DataSourceStreamReader):
    def __init__(self, config: dict):
        self.config = config
        self.tables = [CapturedTable.from_json(t) for t in config["tables"]]
        # several tables: rows tagged by table (plugin.tables); Arrow types made here, not per task
        self.layout = TableLayout.from_json(config["layout"]).prepare_arrow() if config.get("layout") else None
        self.names = [t.qualified for t in self.tables]
        self.index = {name: i for i, name in enumerate(self.names)}
        self.legacy = config.get("legacy_tables") or self.names
        self.slot = config["slot"]
        self.max_rows = max(1, int(config["max_rows"]))
        self._conn = None
        self._checked_lsn = None    # the start whose slot position was last found in place
        self._exporter = None     # the replication connection keeping the slot's snapshot alive
        self._planned: dict[tuple[int, int], list] = {}   # (start, end) -> messages of a small batch

    def __getstate__(self) -> dict:
        # Spark pickles the reader to run read() in its workers: no connection, no messages.
        return {**self.__dict__, "_conn": None, "_exporter": None, "_planned": {}}

    def _db(self):
        if self._conn is None or self._conn.closed:
            self._conn = connect(self.config)
        return self._conn

    # -- position ------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        # No slot yet: Spark asks for the initial offset again whenever it replays the first
        # batch, so it must be the same every time and create nothing (see latestOffset).
        snapshot = {"table": 0, "after": None} if self.config["startup_mode"] == "initial" else None
        return {"lsn": None, "snapshot": snapshot, "splits": [], "tables": self.names}

    def _covered(self, offset: dict) -> list[str]:
        return offset.get("tables") or self.legacy

    def _split_table(self, split: list) -> int | None:
        """The index in today's tables of a split's table (by name; by index in an older offset);
        None when the table is no longer captured."""
        name = split[0] if isinstance(split[0], str) else self.legacy[split[0]]
        return self.index.get(name)

    def _start_slot(self, start: dict) -> dict:
        """The first batch's planning: create the publication and the slot (replacing any left
        by an earlier start that never logged a batch, so nothing can depend on them).

        With a snapshot to read, the slot exports the snapshot of its consistent point, and
        the splits read the tables as of exactly that point: every change after it comes from
        the stream, none before it (see the docs page). The export lives while the connection
        that created the slot stays open and idle: until the snapshot's last batch is read."""
        exporting = start["snapshot"] is not None
        conn = replication.connect_replication(self.config)
        try:
            lsn, export = slot.start_afresh(self._db(), self.slot, self.tables, self._run(),
                                            lambda: replication.create_slot(conn, self.slot, exporting),
                                            holder.Wait.of(self.config, self.slot), bool(self.config.get("slot_given")))
        except BaseException:
            conn.close()
            raise
        if exporting:
            self._exporter = conn
        else:
            conn.close()
        return {**start, "lsn": lsn, "export": export}

    def _run(self) -> str:
        return self.config.get("job_id") or "local"

    def _end_export(self) -> None:
        if self._exporter is not None:
            self._exporter.close()
            self._exporter = None

    def _check_position(self, offset: dict) -> None:
        """A batch fails, never skips, when the slot lost its place: checked for every new start, as
        between batches the slot is idle and anyone may read, advance or recreate it. Once per start:
        the plan and the partitions of a batch, and an idle stream's polls, share one; each stream
        start checks again right before it reads (``replication._check_not_past``)."""
        if offset["lsn"] is None or offset["lsn"] == self._checked_lsn:
            return
        if self.config.get("slot_given") and self._checked_lsn is None:   # a mark naming nobody: this run's
            ownership.claim(self._db(), self.slot, self._run(), offset["lsn"])
        try:
            slot.check_position(self._db(), self.slot, offset["lsn"])
        except slot.LostPosition as exc:
            raise permanent_in_worker(slot.lost_position_message(self.slot, offset["lsn"], str(exc))) from None
        self._checked_lsn = offset["lsn"]

    def _check_published(self, start: dict) -> None:
        """Fail, never skip, when a table the position covers was dropped, created again or renamed
        (membership.py); tables added to table-names are published by ``_retable`` first."""
        covered = {*self._covered(start), *((start.get("backfill") or {}).get("tables") or [])}
        try:
            check_published(self._db(), self.slot, [t for t in self.tables if t.qualified in covered])
        except TableGone as exc:
            raise permanent_in_worker(str(exc)) from None

    def latestOffset(self, start: dict, limit=None) -> dict:
        self._check_position(start)
        if start["lsn"] is None:
            begun = self._start_slot(start)
            return self._next_splits(begun) if begun["snapshot"] is not None else begun
        self._check_published(start)
        if start["snapshot"] is not None:
            return self._next_splits(start)
        if start.get("backfill") is not None:
            return self._next_backfill(start)
        self._end_export()          # the snapshot's last batch, which ends at ``start``, is read
        covered = self._covered(start)
        if set(covered) != set(self.names):        # tables added or removed (not just reordered)
            return self._retable(start, covered)
        flushed = slot.flushed_lsn(self._db())
        plan = plan_batch(self.config, self.slot, start["lsn"], self.max_rows, flushed, self.tables,
                          self._admitted(start))
        if plan.changes == 0:
            # Nothing for our tables, but WAL grew (other tables, other databases): a stream
            # decodes from the slot's position, so move past it. Safe: the plan read to the
            # WAL flushed before it began, and a transaction committing later ends after that.
            if max(plan.end, flushed) - start["lsn"] >= IDLE_ADVANCE_BYTES:
                return self._streaming(start, max(plan.end, flushed), 0)
            return start
        if plan.messages is not None:
            # kept until the batch's partitions are made (Spark asks right after planning it)
            self._planned = {**dict(list(self._planned.items())[-1:]), (start["lsn"], plan.end): plan.messages}
        return {**self._streaming(start, plan.end, plan.changes), "bytes": plan.bytes,
                **({"lookups": True} if plan.lookups else {})}

    def _streaming(self, start: dict, lsn: int, changes: int) -> dict:
        offset = {"lsn": lsn, "snapshot": None, "splits": [], "changes": changes, "tables": self._covered(start)}
        since = {name: point for name, point in (start.get("since") or {}).items() if point > lsn}
        return {**offset, "since": since} if since else offset

    def _admitted(self, start: dict) -> Admitted:
        return Admitted(frozenset(self._covered(start)), dict(start.get("since") or {}))

    def _next_splits(self, start: dict) -> dict:
        """The initial snapshot's next splits, table after table of the offset's own list (a table
        no longer captured is passed over; one added meanwhile waits for its own snapshot)."""
        covered = self._covered(start)
        found = self._splits(covered, start["snapshot"]["table"], start["snapshot"]["after"])
        splits, table, after = found
        snapshot = {"table": table, "after": after} if table < len(covered) else None
        return {"lsn": start["lsn"], "snapshot": snapshot, "splits": splits, "export": start.get("export"),
                "tables": covered}

    def _splits(self, names: list[str], table: int, after) -> tuple[list, int, object]:
        """Splits of ``names[table:]`` from key ``after`` on, up to a batch's rows: (splits, where
        the next batch starts)."""
        size = max(1, int(self.config["split_size"]))
        splits: list = []
        while len(splits) * size < self.max_rows and table < len(names):
            index = self.index.get(names[table])
            if index is None:
                table, after = table + 1, None
                continue
            upto = next_boundary(self._db(), self.tables[index], after, size)
            splits.append([names[table], after, upto])
            table, after = (table, upto) if upto is not None else (table + 1, None)
        return splits, table, after

    # -- tables added to (or removed from) table-names of a resumed job ------------------------
    def _retable(self, start: dict, covered: list[str]) -> dict:
        """The stream is between batches, and the tables it covers are not today's: make the
        publication list today's, and snapshot the added tables on their own. Removed tables are
        no longer decoded nor read (from this offset on, their changes are left out by name)."""
        added = [name for name in self.names if name not in covered]
        kept = [name for name in covered if name in self.index]
        slot.set_publication_tables(self._db(), self.slot, self.tables)
        if not added:
            return self._streaming({**start, "tables": kept}, start["lsn"], 0)
        if self.config["startup_mode"] != "initial":
            # startup.mode = latest: an added table too is read from now on, with no snapshot
            point = slot.flushed_lsn(self._db())
            since = {**(start.get("since") or {}), **{name: point for name in added}}
            return {**self._streaming(start, start["lsn"], 0), "tables": [*kept, *added], "since": since}
        return self._begin_backfill({**start, "tables": kept}, added)

    def _begin_backfill(self, start: dict, added: list[str]) -> dict:
        """A temporary slot created now (after the publication took the added tables in) gives a
        point and the snapshot exactly as of it: the added tables are read as of that snapshot,
        and their changes streamed only from transactions committing after it (``since``), so
        none is lost or read twice at the boundary. The other tables' position does not move
        while the snapshot is read."""
        conn = replication.connect_replication(self.config)
        try:
            point, export = replication.create_slot(conn, slot.temporary_name(self.slot), True, temporary=True)
        except Exception:
            conn.close()
            raise
        self._end_export()
        self._exporter = conn
        backfill = {"tables": added, "table": 0, "after": None, "lsn": point, "export": export}
        return self._next_backfill({**start, "backfill": backfill})

    def _next_backfill(self, start: dict) -> dict:
        backfill = start["backfill"]
        splits, table, after = self._splits(backfill["tables"], backfill["table"], backfill["after"])
        base = {"lsn": start["lsn"], "snapshot": None, "splits": splits, "export": backfill["export"],
                "tables": self._covered(start)}
        if table < len(backfill["tables"]):
            return {**base, "backfill": {**backfill, "table": table, "after": after},
                    **({"since": start["since"]} if start.get("since") else {})}
        # the snapshot's last batch: from here on the added tables are streamed with the others
        joined = [*base["tables"], *[n for n in backfill["tables"] if n in self.index]]
        since = {**(start.get("since") or {}), **{n: backfill["lsn"] for n in backfill["tables"]}}
        return {**base, "tables": joined, "since": since}

    # -- batches -------------------------------------------------------------------------
    def partitions(self, start: dict, end: dict) -> list:
        self._check_position(start)
        if end["splits"]:
            return [SnapshotSplit(index, after, upto, end.get("export"), n * PARTITION_SEQ_STRIDE)
                    for n, (index, after, upto) in
                    enumerate((self._split_table(split), split[1], split[2]) for split in end["splits"])
                    if index is not None]
        if start["lsn"] is None or end["lsn"] <= start["lsn"] or end.get("changes", 1) == 0:
            return []
        # a replay after a restart has no planned messages: its task streams the range again
        return [ChangeRange(start["lsn"], end["lsn"], self._planned.pop((start["lsn"], end["lsn"]), None),
                            self._admitted(start))]

    def read(self, partition) -> Iterator:
        builder = RowBatches(self.tables, self.config["spark_time_zone"], self.layout,
                             getattr(partition, "first_seq", 0), self.config.get("infinity", FAIL))
        if isinstance(partition, ChangeRange):
            changes = read_changes(self.config, self.tables, self.slot, partition.start, partition.end,
                                   partition.messages, partition.admitted)
            rows = with_unchanged_values(changes, self.tables, lambda: connect(self.config))
            for kind, table, values in rows:
                yield from builder.add(kind, table, values)
        else:
            table = self.tables[partition.table]
            conn = connect(self.config, autocommit=False)
            try:
                as_of_slot(conn, partition.export, table)
                with conn.cursor(name="seatide_snapshot") as cursor:
                    cursor.itersize = max(1, int(self.config["fetch_size"]))
                    cursor.execute(page_query(table, partition.after, partition.upto))
                    names = [c.name for c in table.columns]
                    for record in cursor:
                        yield from builder.add(int(RowKind.INSERT), partition.table, dict(zip(names, record)))
            except errors.UndefinedTable:
                conn.rollback()
                raise permanent_in_worker(str(table_dropped(conn, table))) from None
            finally:
                conn.close()
        yield from builder.flush()

    def commit(self, end: dict) -> None:
        """Spark committed every batch up to ``end``: let the slot forget the changes before it.

        During the snapshot the slot stays at its consistent point: the changes after it are
        still to be streamed once the snapshot ends.
        """
        if end["snapshot"] is None:
            slot.advance(self._db(), self.slot, end["lsn"], holder.Wait.of(self.config, self.slot))

    def stop(self) -> None:
        self._end_export()
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def as_of_slot(conn, export: str | None, table: CapturedTable) -> None:
    """Make ``conn``'s transaction see the tables as of the slot's consistent point.

    The export is gone when the driver that created the slot stopped before the snapshot was
    read (a crash, a restart). Then a table with a key is read as it is now: a change after the
    consistent point may show in the split and again in the stream, which applied by key ends
    at the source's state. A table without a key has nothing to apply by, so such a row would
    stay twice: refuse instead."""
    from psycopg import errors

    conn.commit()                       # end the transaction connect() started
    if export is None:
        return
    try:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        conn.execute(f"SET TRANSACTION SNAPSHOT '{export}'")
        return
    except (errors.InvalidParameterValue, errors.UndefinedObject, errors.ObjectNotInPrerequisiteState):
        conn.rollback()
    if not table.keys:
        raise permanent_in_worker(
            f"Postgres-CDC: the snapshot of {table.qualified} cannot be read as of the replication slot's "
            "start any more (the driver that held it stopped while the snapshot was read), and the table "
            f"has no key to apply a row seen twice by. Empty the target table and {START_OVER}; or give "
            "the table a key (a primary key, or primaryKeys in table-names-config)")
