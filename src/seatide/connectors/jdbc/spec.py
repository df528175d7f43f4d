"""What one Jdbc sink table writes and how: the options resolved once (``JdbcSinkSpec``), and the
error that names an option or a table contradicting them.

Below the sink (sink.py builds a spec from its options) and below the writer's parts, which all
read it: the one place they share, so none of them imports the plugin.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from seatide.connectors.jdbc.query import InsertQuery
from seatide.connectors.jdbc.url import MYSQL, JdbcUrl
from seatide.plugin.base import PermanentError


class JdbcSinkError(PermanentError):
    """A table or field that contradicts the options; the message says what to change."""


# leading comments skipped as MySQL does: /* */, # to the line's end, and -- followed by whitespace
# (``-- empty it`` then TRUNCATE is DDL; outside review of 4f9f607: it was taken for DML and ran unlocked)
# A statement that is plainly DML: its first word, after comments, DELETE, UPDATE, INSERT or REPLACE.
# Every other statement is taken for DDL (locked first, checked before it runs): MariaDB runs DDL
# behind ``SET STATEMENT ... FOR`` and inside an executable comment ``/*! ... */`` too, and a
# statement wrongly taken for DML runs before the kept-rows check and commits at once (review of
# aef6f1f, R-C); one wrongly taken for DDL is only locked, or refused without LOCK TABLES.
_DML = re.compile(r"^\s*(?:(?:/\*(?!!).*?\*/|#[^\n]*(?:\n|$)|--(?:\s[^\n]*)?(?:\n|$))\s*)*"
                  r"(?:DELETE|UPDATE|INSERT|REPLACE)\b", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class JdbcSinkSpec:
    """Everything the writer needs, resolved from the options once."""

    url: JdbcUrl
    driver: str
    user: str | None
    password: str | None
    properties: dict
    database: str | None                # database connected to (default: the URL's)
    table: tuple[str, ...] | None       # (schema or database, name) or (name,); None in query mode
    query: InsertQuery | None
    primary_keys: tuple[str, ...]
    enable_upsert: bool
    batch_size: int
    schema_save_mode: str
    data_save_mode: str
    custom_sql: str | None
    create_index: bool
    field_ide: str
    connect_timeout: int

    @property
    def custom_sql_is_ddl(self) -> bool:
        """Whether ``custom_sql`` is taken for DDL (SeaTunnel's usual ``TRUNCATE TABLE``), which MySQL/MariaDB
        commit at once: no rollback can undo it after a check (``save_modes._commits_at_once``). Anything
        but plain DML is (``_DML``)."""
        return not _DML.match(self.custom_sql or "")

    def placed(self) -> tuple[str | None, tuple[str, ...] | None]:
        """(the database to connect to, the table as named through that connection). MySQL/MariaDB:
        the URL's database, the table named with its own database, so that one connection (and one
        transaction) writes every database of the server; PostgreSQL: a connection per database,
        tables named by schema."""
        if self.url.dialect == MYSQL and self.table is not None:
            table = self.table if len(self.table) > 1 or not self.database else (self.database, *self.table)
            return self.url.database, table
        return self.database, self.table

    def target_name(self, default_schema: Callable[[], str]) -> tuple[str, str, str] | None:
        """(database, schema, table): the target table however the options spell it, with what the
        dialect fills in where they name none: MySQL/MariaDB the connection's database (it has no
        schema), PostgreSQL the connection's database (``postgres`` as ``JdbcUrl.connect``) and
        ``default_schema()``, the schema an unqualified name resolves to on that connection (its
        search_path's: not always ``public``). None in query mode."""
        if self.table is None:
            return None
        qualified = len(self.table) > 1
        if self.url.dialect == MYSQL:
            return (self.table[0] if qualified else self.database or ""), "", self.table[-1]
        return self.database or "postgres", (self.table[0] if qualified else default_schema()), self.table[-1]


__all__ = ["JdbcSinkError", "JdbcSinkSpec"]
