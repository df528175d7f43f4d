"""``seatide_sink_commits``: which micro-batches a Jdbc sink has committed, kept in the target database.

One row per committed batch, inserted in the same transaction that applies the batch to
the target, so "the rows are there" and "the batch is recorded" are one fact. The
transaction id is the primary key: a second attempt of the batch (a replay after a crash,
or a racing zombie driver) either finds the row and writes nothing, or blocks on the
first attempt's uncommitted insert and then fails on the key, and writes nothing.

Rows are pruned as the sink moves on: a sink keeps the records of its last
``checkpoint.retained`` batches (Spark can replay no older batch) and drops records of an
earlier lineage of the same job pipeline (a fresh start never resumes it).
"""

from __future__ import annotations

from dataclasses import dataclass

from seatide.connectors.jdbc.dialect import Dialect
from seatide.connectors.jdbc.url import POSTGRESQL

TABLE = "seatide_sink_commits"


@dataclass(frozen=True)
class CommitRecords:
    dialect: Dialect
    schema: str | None      # same schema (PostgreSQL) or database (MySQL) as the target

    @property
    def table(self) -> str:
        return self.dialect.qualified((self.schema, TABLE) if self.schema else (TABLE,))

    @property
    def _named(self) -> str:
        """``table`` in a statement with parameters, which both clients format: a % in the
        schema's name doubled, or they read it as a placeholder's."""
        return self.table.replace("%", "%%")

    def create(self, cursor) -> None:
        if self.dialect.name == POSTGRESQL:     # IF NOT EXISTS still asks CREATE on the schema, which a
            cursor.execute("SELECT to_regclass(%s)", (self.table,))     # user of the table may lack
            if cursor.fetchone()[0] is not None:
                return
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {self.table} (transaction_id VARCHAR(255) NOT NULL PRIMARY KEY, "
                       "sink_id VARCHAR(255) NOT NULL, batch_id BIGINT NOT NULL, row_count BIGINT NOT NULL, "
                       "committed_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)")

    def rows_of(self, cursor, transaction_id: str) -> int | None:
        """Rows the batch wrote when it is committed; None when it is not."""
        cursor.execute(f"SELECT row_count FROM {self._named} WHERE transaction_id = %s", (transaction_id,))
        row = cursor.fetchone()
        return None if row is None else int(row[0])

    def any_for(self, cursor, sink_id: str, lineage: str) -> bool:
        """Whether this lineage of the sink has committed a batch (a job id may be used again)."""
        cursor.execute(f"SELECT 1 FROM {self._named} WHERE sink_id = %s AND LEFT(transaction_id, %s) = %s LIMIT 1",
                       (sink_id, len(lineage), lineage))
        return cursor.fetchone() is not None

    def insert(self, cursor, transaction_id: str, sink_id: str, batch_id: int, rows: int) -> None:
        cursor.execute(f"INSERT INTO {self._named} (transaction_id, sink_id, batch_id, row_count) "
                       "VALUES (%s, %s, %s, %s)", (transaction_id, sink_id, batch_id, rows))

    def set_rows(self, cursor, transaction_id: str, rows: int) -> None:
        """The batch's row count, known once it is staged (its record is inserted first)."""
        cursor.execute(f"UPDATE {self._named} SET row_count = %s WHERE transaction_id = %s", (rows, transaction_id))

    def prune(self, cursor, sink_id: str, lineage: str, keep_from: int) -> None:
        """Forget batches older than ``keep_from`` and those of other lineages (``lineage``: id prefix).
        A record that is no batch's (batch -1: the sink's save modes, made once per run) stays."""
        cursor.execute(f"DELETE FROM {self._named} WHERE sink_id = %s AND batch_id >= 0 AND (batch_id < %s OR "
                       "LEFT(transaction_id, %s) <> %s)", (sink_id, keep_from, len(lineage), lineage))


__all__ = ["CommitRecords", "TABLE"]
