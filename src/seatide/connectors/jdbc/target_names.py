"""How the Jdbc sink names a target table: now, one key per table however a sink's options spell
it (review 31 F5), and as earlier SeaTides named it, by the spelling, which their save-mode records
and door decisions still carry (``Target.earlier_keys``)."""

from __future__ import annotations

import logging
from dataclasses import replace

from seatide.connectors.jdbc.commit_record import TABLE as COMMITS_TABLE
from seatide.connectors.jdbc.commit_record import CommitRecords
from seatide.connectors.jdbc.dialect import Dialect
from seatide.connectors.jdbc.sink_session import open_session
from seatide.connectors.jdbc.spec import JdbcSinkError, JdbcSinkSpec
from seatide.connectors.jdbc.url import POSTGRESQL
from seatide.plugin.base import SinkContext
from seatide.plugin.save_mode_door import decision_name
from seatide.plugin.sink_protocol import routes_of
from seatide.plugin.tables import TableRoute
from seatide.store.target_identity import UNKNOWN_TABLE, jdbc_target, query_table, query_table_first_read, server_host

log = logging.getLogger(__name__)

# The name of a run's record of the schema an unqualified PostgreSQL table resolved to (one per connection)
PINNED_SCHEMA = "unqualified_schema"


class TargetNames:
    """The names of the targets of one Jdbc sink (``first``: its first route's sink) in a job."""

    def __init__(self, ctx: SinkContext | None, first):
        self.ctx = ctx
        self.first = first
        self._schemas: dict[tuple, str] = {}    # (host, port, database, user): the schema pinned for it
        self._spellings: dict[str, list[str]] | None = None     # ``job_spellings``

    def key(self, route: TableRoute) -> str:
        """The target table as every sink of the job names it however its options spell it (one
        table, one key): server, database, schema and table (``JdbcSinkSpec.target_name``)."""
        spec = route.sink.spec()
        database, schema, table = self._named(spec)
        return jdbc_target(spec.url.dialect, spec.url.host, spec.url.port, database, schema, table)

    def key_first_read(self, route: TableRoute) -> str:
        """The key as the first target keys gave it (2026-11-30): a query's quoted table name read only up to its first
        character outside ``[\\w$]`` (outside review 8b, F3); its checkpoints name it."""
        spec = route.sink.spec()
        database, schema, table = self._named(spec, query_table_first_read)
        return jdbc_target(spec.url.dialect, spec.url.host, spec.url.port, database, schema, table)

    def spelled(self, route: TableRoute) -> str:
        """The key as the SeaTide before ``store.target_identity`` gave it (the host as spelled, a
        query's target ``query``), which its door decisions, marks and decided batches name."""
        spec = route.sink.spec()
        url = spec.url
        named = spec.target_name(lambda: self._search_schema(spec))
        database, schema, table = named or (spec.database or "", "", "query")
        return f"jdbc:{url.dialect}://{url.host.lower()}:{url.port}/{database}/{schema}/{table}"

    def _named(self, spec: JdbcSinkSpec, read=query_table) -> tuple[str, str, str]:
        """(database, schema, table); in query mode the table its statement names, qualified as a
        table option would be, or ``UNKNOWN_TABLE`` (outside review 7: ``.../query`` overlapped
        nothing, so another sink's DROP_DATA emptied the rows it committed)."""
        named = spec.target_name(lambda: self._search_schema(spec))
        if named is not None:
            return named
        table = read(spec.query.head) if spec.query is not None else None
        if table is None or len(table) > 2:
            return spec.database or "", "", UNKNOWN_TABLE
        return replace(spec, table=table).target_name(lambda: self._search_schema(spec))

    def schema_of(self, spec: JdbcSinkSpec) -> str:
        """PostgreSQL: the schema an unqualified ``spec.table`` is keyed in, which the sink writes it in."""
        return self._search_schema(spec)

    def _search_schema(self, spec: JdbcSinkSpec) -> str:
        """PostgreSQL: the schema an unqualified table name resolves to on the connection, asked of
        the server once per database (review 31 N3: with a search_path whose first schema exists,
        ``orders`` is not ``public.orders``, and taking them as one target sent one's rows into the other),
        and pinned for the job's run by the first attempt that asks (``SinkContext.decide_once``):
        asked again by a later attempt, a schema made first on the search_path since took its key,
        its commit records' home and its rows, so a batch the dead attempt committed was replayed
        into a second table (outside review). A run recorded before the pin pins the schema it wrote
        in (``_written_before``), not where the name resolves now (outside review of the pin, #1)."""
        at = (spec.url.host, spec.url.port, spec.database, spec.user)
        if at not in self._schemas:
            with open_session(spec, spec.database) as conn:
                cursor = conn.cursor()
                cursor.execute("SELECT current_schema()")
                now = cursor.fetchone()[0] or "public"   # none of search_path exists: CREATE goes nowhere
                plan = {"schema": self._written_before(cursor, spec) or now}
                decide = self.ctx.decide_once if self.ctx is not None else (lambda _name, plan: plan)
                pinned = str(decide(decision_name(PINNED_SCHEMA, _connection(spec)), plan)["schema"])
                if pinned != now:
                    _check_pinned(cursor, spec, pinned, now)
                    log.info("Jdbc sink: %s in schema %s, as the job's run resolved it first; the search_path "
                             "of user %s resolves it to %s now", _pinned_what(spec), pinned, spec.user, now)
                conn.rollback()
                self._schemas[at] = pinned
        return self._schemas[at]

    def _written_before(self, cursor, spec: JdbcSinkSpec) -> str | None:
        """The schema the run wrote in before it pinned one (a SeaTide before the pin resolved the name
        at each attempt): the one its checkpoint's target keys name for the table, else the one holding
        the commit records of this sink's lineage. None: the run wrote nothing here (yet). Pinned where
        the name resolves now, a committed batch the checkpoint had not heard of was applied again
        there, into a second table (outside review of the pin, #1)."""
        if self.ctx is None:
            return None
        url = spec.url
        here = jdbc_target(url.dialect, url.host, url.port, spec.database or "postgres", "", "")[:-1]
        for name in _unqualified(spec):
            for key in (self.ctx.checkpointed() or {}).get("targets", {}):
                if key.startswith(here) and key.endswith(f"/{name}") and len(key) > len(here) + len(name) + 1:
                    return key[len(here):-len(name) - 1]
        sink_id = f"{self.ctx.job_id}/{self.ctx.pipeline_id}/{self.ctx.plugin_id}"
        cursor.execute("SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                       "WHERE c.relname = %s AND c.relkind IN ('r', 'p') AND has_table_privilege(c.oid, 'SELECT') "
                       "ORDER BY n.nspname", (COMMITS_TABLE,))
        for (schema,) in cursor.fetchall():
            if CommitRecords(Dialect(POSTGRESQL), schema).any_for(cursor, sink_id, self.ctx.transaction_prefix):
                return schema
        return None

    @staticmethod
    def earlier(route: TableRoute, multi: bool) -> str:
        """The key an earlier SeaTide gave the target, as the options of ``route`` (of a sink with
        several tables: ``multi``) spelled it, which named its save-mode record."""
        spec = route.sink.spec()
        database, table = spec.placed() if multi else (spec.database, spec.table)
        url = spec.url
        label = ".".join(table) if table else "query"
        return f"jdbc:{url.dialect}://{url.host.lower()}:{url.port}/{database or ''}/{label}"

    def job_spellings(self) -> dict[str, list[str]]:
        """Each target key on this sink's server: the keys every Jdbc sink of the job gave it
        before (review 31 N2). A job checkpointed before one table was one target however spelled
        has its save-mode decision under the key of whichever sink prepared it first: another sink
        of the job, spelling the table another way, must find it there, or its DROP_DATA deletes
        what the first committed."""
        if self._spellings is None:
            self._spellings = {}
            here = self.first.spec().url
            server = (here.dialect, server_host(here.host), here.port)
            for sink in self.ctx.job_sinks if self.ctx is not None else ():
                if type(sink) is not type(self.first):
                    continue
                for route in routes_of(sink, sink.routes):
                    url = route.sink.spec().url
                    if (url.dialect, server_host(url.host), url.port) == server:
                        self._spellings.setdefault(self.key(route), []).extend(
                            (self.spelled(route), self.earlier(route, bool(sink.routes)), self.key_first_read(route)))
        return self._spellings


def _connection(spec: JdbcSinkSpec) -> str:
    """What an unqualified name's schema depends on: the server, the database and the user (whose
    role may set its own search_path)."""
    url = spec.url
    return f"{url.dialect}://{server_host(url.host)}:{url.port}/{spec.database or 'postgres'}?user={spec.user}"


def _unqualified(spec: JdbcSinkSpec) -> tuple[str, ...]:
    """The table ``spec`` writes when it names no schema (its option 'table', or its query's)."""
    table = spec.table if spec.table is not None else (query_table(spec.query.head) if spec.query else None)
    return tuple(table) if table is not None and len(table) == 1 else ()


def _pinned_what(spec: JdbcSinkSpec) -> str:
    """What the pinned schema holds for ``spec``: its unqualified table, or (a table that names its
    schema, of a sink with several) only the sink's commit records, kept in the connection's schema."""
    named = _unqualified(spec)
    if named:
        return f"table '{named[0]}' names no schema and is written"
    return "the sink's commit records (its tables name their schemas) are kept"


def _check_pinned(cursor, spec: JdbcSinkSpec, pinned: str, now: str) -> None:
    """Refuse to go on when the schema the run pinned is gone: the table's rows and the records of
    the batches committed into it were there, and writing where the name resolves now would
    create a second table and apply those batches again."""
    cursor.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (pinned,))
    if cursor.fetchone() is None:
        table = _unqualified(spec)
        kept = f"with table \"{table[0]}\"" if table else f"with table {COMMITS_TABLE}"
        anew = "with the schema named in 'table'" if table else "(its commit records start afresh)"
        raise JdbcSinkError(
            f"Jdbc sink: {_pinned_what(spec)} in schema '{pinned}', where this job's run first resolved it for user "
            f"'{spec.user}' in database '{spec.database or 'postgres'}'; schema '{pinned}' no longer exists, so the "
            f"job stops rather than go on in '{now}', where the name resolves now, and apply its committed batches "
            f"again. Create the schema again (CREATE SCHEMA \"{pinned}\", {kept} if its rows are to be kept) and "
            f"resume the job, or submit the job anew {anew}")


__all__ = ["PINNED_SCHEMA", "TargetNames"]
