"""A CDC source's table changes, applied to a Jdbc target (plugin/evolution.py says what each
behaviour does), as destructive steps under the attempt's fence.

A change is applied unless the target shows it applied already (a crash may repeat the call). A
statement the database refuses fails the job naming it, except under try_evolve (logged, and the
target keeps its shape for that change).

**Fenced** (finding 16 of issue 30). A zombie (a replaced attempt still running) held before its
``DROP COLUMN`` must not drop a column its replacement has since added again and filled. The
writer applies a batch of changes under a lock its replacement takes too (``JdbcTargets.evolve``
takes it at every start, changes or not), and each statement passes the attempt's fence under
that lock: on PostgreSQL inside the statement's own transaction, right before COMMIT, as a batch
does; on MySQL, whose DDL commits by itself, in an open transaction right before the statement,
so that a writer paused there is idle in a transaction, which the server ends (sink_session.py).
A zombie that comes to the lock after its replacement was made current is refused; one that
holds it makes its change before the replacement has looked at the target, which then sees it.
"""

from __future__ import annotations

import json
import logging
from typing import Callable

from seatide.connectors.jdbc.spec import JdbcSinkError
from seatide.connectors.jdbc.target import JdbcTarget, first_line
from seatide.connectors.jdbc.url import POSTGRESQL
from seatide.plugin.evolution import ADD, DROP, RENAME, RETYPE, TableChange
from seatide.plugin.types import SOURCE_DEFAULT, SOURCE_DIALECT, SOURCE_NOT_NULL

log = logging.getLogger(__name__)


def evolve(conn, route: JdbcTarget, change: TableChange, behaviour: str, fence: Callable[[], None]) -> None:
    """Apply ``change`` to ``route``'s target as ``behaviour`` says, under ``fence``."""
    cursor = conn.cursor()
    dialect = route.dialect
    if route.table is None or not dialect.table_exists(cursor, route.table):
        return                       # the save modes create it from the new shape
    statements = _statements(route, change, behaviour, dialect.nullability(cursor, route.table))
    for ddl in statements:
        if dialect.name != POSTGRESQL:    # MySQL's DDL commits by itself: fenced in a transaction before it
            conn.begin()
            fence()
        try:
            cursor.execute(ddl)
        except Exception as exc:  # noqa: BLE001 - the database's own refusal, named below
            conn.rollback()
            reason = first_line(exc)
            if behaviour == "try_evolve":
                log.warning("Jdbc sink: %s refused %s (%s); the table keeps its shape for it", route.label, ddl, reason)
                return
            raise JdbcSinkError(f"Jdbc sink: table {route.label} refused the schema change {change.describe()}: "
                                f"{ddl}: {reason}") from None
        log.info("Jdbc sink: %s: %s", route.label, ddl)
    if statements and dialect.name == POSTGRESQL:    # DDL is transactional there: fenced right before
        fence()                                      # COMMIT, as a batch is
    conn.commit()


def _statements(route: JdbcTarget, change: TableChange, behaviour: str, existing: dict[str, str | None]) -> list[str]:
    """The statements that apply ``change`` to a target with the columns ``existing`` (each with its
    type where it is NOT NULL, else None), in order."""
    dialect = route.dialect
    column, evolving = route.column(change.column), behaviour in ("evolve", "try_evolve")
    q, target = dialect.quote, route.quoted
    if change.kind == ADD and behaviour != "ignore" and column not in existing:
        return [add_column(route, column, change.field, defined=True)]
    if change.kind == DROP and evolving and column in existing:
        return [f"ALTER TABLE {target} DROP COLUMN {q(column)}"]
    if change.kind == DROP and behaviour == "lenient":
        return _nullable(route, column, existing)          # kept: rows from now on leave it null
    if change.kind == RENAME:
        new = route.column(change.new_name)
        if evolving:
            route.renames[new] = column
            if column in existing and new not in existing:
                return [f"ALTER TABLE {target} RENAME COLUMN {q(column)} TO {q(new)}"]
        elif behaviour == "lenient" and new not in existing:
            # the rows before the rename keep their values in the old column: the new one starts
            # empty for them, so it takes neither the NOT NULL nor the default
            return [*_nullable(route, column, existing), add_column(route, new, change.field, defined=False)]
        return []
    if change.kind == RETYPE and column in existing and (evolving or behaviour == "lenient" and change.widens()):
        return [dialect.retype(target, column, dialect.field_type(change.field))]
    return []


def add_column(route: JdbcTarget, column: str, field, defined: bool) -> str:
    """ALTER TABLE ... ADD COLUMN for the source's ``field``; ``defined``: with the source column's
    NOT NULL and DEFAULT (plugin/types.py), which also fill the rows the target has, as the source
    server filled its own without writing a row change for them (finding 11 of issue 30)."""
    dialect = route.dialect
    definition = dialect.field_type(field)
    metadata = field.metadata or {}
    default = dialect.column_default(json.loads(metadata[SOURCE_DEFAULT]), metadata.get(SOURCE_DIALECT),
                                     definition) if defined and SOURCE_DEFAULT in metadata else None
    not_null = defined and bool(metadata.get(SOURCE_NOT_NULL))
    if not_null and default is None and dialect.name == POSTGRESQL:
        # MySQL fills a NOT NULL column without a default with its type's zero value, a value
        # PostgreSQL has no rule for: there it would refuse the column on a table with rows
        log.warning("Jdbc sink: %s: column %s is NOT NULL without a default PostgreSQL can take; added "
                    "as nullable", route.label, column)
        not_null = False
    if default is None and SOURCE_DEFAULT in metadata and defined:
        log.warning("Jdbc sink: %s: the default of column %s (%s) has no %s form; added without it",
                    route.label, column, metadata[SOURCE_DEFAULT], dialect.label)
    definition += (" NOT NULL" if not_null else "") + (f" DEFAULT {default}" if default is not None else "")
    return f"ALTER TABLE {route.quoted} ADD COLUMN {dialect.quote(column)} {definition}"


def _nullable(route: JdbcTarget, column: str, existing: dict[str, str | None]) -> list[str]:
    """The statement that lets a column kept after the source dropped or renamed it take NULL (rows
    from now on leave it so), where it is NOT NULL and not part of the key."""
    if existing.get(column) is None or column in route.keys:
        return []
    return [route.dialect.nullable(route.quoted, column, existing[column])]


__all__ = ["add_column", "evolve"]
