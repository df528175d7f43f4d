"""One table of the Jdbc sink's target database, with every route (input table) that writes it.

A target is the unit of the sink's steps, never a route (DESIGN.md §5, "one sink protocol"):

* **prepare** once per target: its save modes under the target's record (save_modes.py), then
  each route's check that the table fits its fields;
* **stage** one staging table per batch for the whole target, which each route's rows fill
  (Spark's writes, or rows collected on the driver);
* **apply** the staged rows once, by the net change per key: one key's changes are ordered by
  their ``__row_seq`` whichever route carried them, so that a key moved between shards in one
  source transaction (DELETE from orders_1, INSERT into orders_0) ends as the source did (finding
  3 of issue 30). Applied route by route, the later route won whatever the source's order.

The staging table has every column any route stages. Where the routes stage different columns (a
shard that has not had a column added yet), each row carries its column set (``STAGE_GROUP``) and
is applied with its own columns only: a column its input table lacks keeps the target's default
(a new row) or value (an existing one), never a NULL its NOT NULL would refuse.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

from seatide.connectors.jdbc import local_rows
from seatide.connectors.jdbc.dialect import STAGE_GROUP, STAGE_KIND, STAGE_SEQ, UnsupportedType
from seatide.connectors.jdbc.spec import JdbcSinkError
from seatide.connectors.jdbc.target import JdbcTarget, first_line
from seatide.connectors.jdbc.url import POSTGRESQL
from seatide.plugin.rowkind import HIDDEN_COLUMNS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StageColumns:
    """A batch's staging table's columns, and the column set each route's rows have."""

    union: list[str]                      # every route's columns, in the order they first come
    sets: list[list[str]]                 # the distinct column sets
    of_route: dict[int, int | None]       # route index -> its set's index (None: one set for all)
    tried: bool = False                   # rows carry the Spark task try that staged them (dialect.STAGE_TRY)

    @classmethod
    def of(cls, staged: dict[int, list[str]], tried: bool = False) -> "StageColumns":
        staged = {i: [c for c in names if c not in HIDDEN_COLUMNS] for i, names in staged.items()}
        sets: list[list[str]] = []
        for names in staged.values():
            if not any(set(names) == set(known) for known in sets):
                sets.append(names)
        union = list(dict.fromkeys(c for names in sets for c in names))
        if len(sets) == 1:
            return cls(union, [union], {i: None for i in staged}, tried)
        return cls(union, sets, {i: next(g for g, known in enumerate(sets) if set(known) == set(names))
                                 for i, names in staged.items()}, tried)

    @property
    def grouped(self) -> bool:
        return len(self.sets) > 1


class TargetTable:
    def __init__(self, routes: dict[int, JdbcTarget]):
        self.routes = routes                        # route index -> its way into this table
        self.lead = next(iter(routes.values()))     # whose options the table's steps follow
        first = self.lead
        for route in routes.values():
            if (route.spec.primary_keys, route.spec.enable_upsert) != \
                    (first.spec.primary_keys, first.spec.enable_upsert):
                raise JdbcSinkError(
                    f"Jdbc sink: input tables {first.source} and {route.source} both write {first.label}, with "
                    f"primary_keys {list(first.spec.primary_keys)} and {list(route.spec.primary_keys)}: one table's "
                    "changes are applied by one key; give both the same primary_keys")

    @property
    def key(self) -> str:
        """A short name for the table that stays the same when input tables are added or reordered."""
        return "d" + hashlib.sha1(self.lead.label.encode()).hexdigest()[:10]

    @property
    def label(self) -> str:
        return self.lead.label

    @property
    def keyed(self) -> bool:
        return bool(self.lead.spec.primary_keys)

    @property
    def stage_schema(self) -> tuple[str, ...]:
        return self.lead.table[:-1] if self.lead.table else ()

    # --- one batch ---------------------------------------------------------------------

    def create_stage(self, conn, columns: StageColumns, stage: tuple[str, ...], engine: str | None,
                     temporary: bool = False, df=None) -> str | None:
        """The batch's staging table for ``columns`` (the target's column types); returns the
        engine it was made with (a server that refuses ``engine``, MySQL's disabled_storage_engines
        or MariaDB's enforce_storage_engine, gets its default one). ``df``: query mode's frame,
        whose fields give the types (there is no target table)."""
        dialect, lead = self.lead.dialect, self.lead

        def ddl(with_engine: str | None) -> str:
            if lead.table is None:
                from pyspark.sql import types as T

                fields = T.StructType([f for f in df.schema.fields if f.name not in HIDDEN_COLUMNS])
                try:
                    return dialect.create_stage_for(stage, fields, lead.spec.query, engine=with_engine,
                                                    tried=columns.tried)
                except UnsupportedType as exc:
                    raise JdbcSinkError(f"Jdbc sink: cannot stage the input for query: {exc}") from None
            select = f"SELECT {', '.join(dialect.quote(c) for c in columns.union)} FROM {lead.quoted} WHERE 1 = 0"
            return dialect.create_stage(stage, select, changes=self.keyed, temporary=temporary, engine=with_engine,
                                        grouped=columns.grouped, tried=columns.tried)

        try:
            conn.cursor().execute(ddl(engine))
        except Exception as exc:
            if engine is None:
                raise
            conn.rollback()
            log.info("Jdbc sink %s: staging in the server's default engine (%s refused: %s)", self.label, engine,
                     first_line(exc))
            engine = None
            conn.cursor().execute(ddl(None))
        if not temporary:
            conn.commit()
        return engine

    def stage_rows(self, conn, collected: dict[int, tuple[list, object]], stage: tuple[str, ...],
                   engine: str | None, temporary: bool) -> tuple[StageColumns, str | None]:
        """Stage rows collected on the driver (route index -> (rows, their schema)) into one table:
        a temporary one inside the batch's transaction (gone with it, nothing left for a crash or a
        zombie to clean), or, where the user may not create one, an ordinary one before the
        transaction opens (MySQL's CREATE TABLE would commit it). Returns (its columns, engine)."""
        staged = {i: local_rows.values(self.routes[i], rows, schema) for i, (rows, schema) in collected.items()}
        columns = StageColumns.of({i: names for i, (names, _rows) in staged.items()})
        engine = self.create_stage(conn, columns, stage, engine, temporary=temporary)
        dialect, cursor = self.lead.dialect, conn.cursor()
        for index, (names, rows) in staged.items():
            names = names + ([STAGE_KIND, STAGE_SEQ] if self.keyed else [])
            group = columns.of_route[index]
            if group is not None:
                names, rows = names + [STAGE_GROUP], [(*row, group) for row in rows]
            into = f"INSERT INTO {dialect.qualified(stage)} ({', '.join(dialect.quote(c) for c in names)})"
            # both clients format the whole statement (PyMySQL's part before VALUES with no
            # arguments): a % in a column's name is a placeholder's to them unless doubled
            into = into.replace("%", "%%")
            cursor.executemany(f"{into} VALUES ({', '.join(['%s'] * len(names))})", rows)
        if not temporary:
            conn.commit()
        return columns, engine

    def apply(self, cursor, columns: StageColumns, stage: tuple[str, ...], in_transaction_drop: bool,
              staged_rows: int | None = None) -> None:
        """Apply the staged rows to the table (inside the batch's transaction); ``in_transaction_drop``:
        drop the staging table with it (PostgreSQL, where DDL is transactional). ``staged_rows``:
        the rows Spark's successful tasks staged (their count, observed by Spark)."""
        quoted = self.lead.dialect.qualified(stage)
        for statement in self.lead.apply_statements(columns.sets, quoted, self._tried_twice(cursor, columns, quoted,
                                                                                             staged_rows)):
            cursor.execute(statement)   # no parameters: neither client then reads % in the SQL as a placeholder
        if in_transaction_drop and self.lead.dialect.name == POSTGRESQL:
            cursor.execute(f"DROP TABLE {quoted}")

    def _tried_twice(self, cursor, columns: StageColumns, quoted: str, staged_rows: int | None) -> bool:
        """Whether the staging table holds more rows than the successful tries staged: a task ran
        again after its first try's rows were committed there (task_tries.py). Only then is one
        try per partition picked (its GROUP BY cost a batch of 400,000 rows ~0.5 s); a count
        costs ~30 ms."""
        if not columns.tried:
            return False
        if staged_rows is None:
            return True
        cursor.execute(f"SELECT COUNT(*) FROM {quoted}")
        found = int(cursor.fetchone()[0])
        if found != staged_rows:
            log.warning("Jdbc sink %s: %d rows staged for %d: a Spark task ran again after its rows were staged; "
                        "one try of each partition is applied", self.label, found, staged_rows)
        return found != staged_rows


__all__ = ["StageColumns", "TargetTable"]
