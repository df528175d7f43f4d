"""Triggers that change a captured table, for a statement the binlog holds as text (review 30, F4).

A session with ``binlog_format = STATEMENT`` (or MIXED) that writes a table the job does not
capture logs only its own statement; a trigger of that table that changes a captured table is not
logged at all (a replica runs it again itself). The stream would pass the statement over (it names
no captured table) and the target would miss the trigger's change for good. So a statement-logged
change of a table that is not captured is looked up here: a trigger of that table whose body names
a captured table fails the stream (``binlog.refuse_rowless``).

What this cannot see, and the docs say so (docs/connectors/mysql-cdc.md): a stored function
called by such a statement (``INSERT INTO audit VALUES (f())``, ``SELECT f()``), whose changes are
not logged either and whose body is not looked at; and a trigger dropped between the statement
and the read (the server's triggers are read when the stream reads the statement, not as they
were when it ran).
"""

from __future__ import annotations

from seatide.connectors.mysql_cdc.catalog import ServerConfig
from seatide.connectors.mysql_cdc.statements import DML, Statement, tokens


def named_in_body(body: str, default_database: str, captured) -> list:
    """The keys of ``captured`` a trigger's body names anywhere, by name: a body may hold blocks of
    many statements, and naming one table too many only refuses a statement the stream would
    otherwise pass over."""
    toks = tokens(body)
    names = []
    for at, tok in enumerate(toks):
        if not (tok.text.startswith("`") or tok.text[:1].isalpha() or tok.text[:1] in "_$"):
            continue
        names.append((default_database, tok.name))
        if at + 2 < len(toks) and toks[at + 1].text == ".":
            names.append((tok.name, toks[at + 2].name))
    return Statement(DML, tuple(names)).names(captured)


class Triggers:
    """The server's triggers, read once per stream read, when a statement first needs them (a
    stream whose sessions all log rows never asks)."""

    def __init__(self, config: ServerConfig):
        self.config = config
        self._found: list | None = None

    def firing(self, tables, captured) -> tuple[str, str, tuple] | None:
        """(the trigger, the table it is on, the key of ``captured`` it changes) for the first
        trigger of one of ``tables`` (a statement's ``(database, table)``) that names a captured
        table; None when none does."""
        if self._found is None:
            with self.config.connect() as conn, conn.cursor() as cur:
                cur.execute("SELECT EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE, TRIGGER_SCHEMA, TRIGGER_NAME, "
                            "ACTION_STATEMENT FROM information_schema.TRIGGERS")
                self._found = list(cur.fetchall())
        written = Statement(DML, tuple(tables))
        for database, table, schema, name, body in self._found:
            if written.names({(database, table): None}):
                hit = named_in_body(body, schema, captured)
                if hit:
                    return f"{schema}.{name}", f"{database}.{table}", hit[0]
        return None
