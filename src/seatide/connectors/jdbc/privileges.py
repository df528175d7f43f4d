"""What a Jdbc sink's user must be allowed to do, mode by mode, and which of it the server says the
user lacks (``seatide check --connect``; docs/connectors/jdbc-sink.md, "Privileges").

SeaTunnel's MySQL sink user has SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX and ALTER on
the target databases; a job SeaTunnel runs with those, SeaTide runs with those (issue 32). One
privilege more helps and is not needed: CREATE TEMPORARY TABLES (PostgreSQL: TEMPORARY on the
database), without which small batches are staged into ordinary tables (temporary_tables.py).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from seatide.connectors.jdbc.commit_record import TABLE
from seatide.connectors.jdbc.spec import JdbcSinkError, JdbcSinkSpec
from seatide.connectors.jdbc.step_statement import NotUnderLock, changed_table, locked_statement
from seatide.connectors.jdbc.url import POSTGRESQL
from seatide.plugin.base import Lacking

log = logging.getLogger(__name__)

TARGET, STAGING, RECORDS = "target", "staging", "records"      # where a need is asked (``Need.on``)
_ALWAYS = (    # (privilege, where, why)
    ("SELECT", TARGET, "reads the target"),
    ("INSERT", TARGET, "writes the rows"),
    ("SELECT", RECORDS, "reads its commit records (seatide_sink_commits)"),
    ("INSERT", RECORDS, "writes each batch's commit record"),
    ("UPDATE", RECORDS, "sets a batch's row count on its commit record"),
    ("DELETE", RECORDS, "forgets commit records older than checkpoint.retained"),
    ("CREATE", RECORDS, "makes its commit-record table"),
    ("CREATE", STAGING, "makes a staging table for each batch"),
    ("DROP", STAGING, "drops its staging tables"),
)
_TEMPORARY = "stages a small batch collected on the driver inside the batch's transaction; without it, " \
             "into an ordinary staging table made before the transaction"


@dataclass(frozen=True)
class Need:
    privilege: str      # as MySQL names it; PostgreSQL's checks follow from it (``_pg_has``)
    why: str
    required: bool = True
    # TARGET: the target table (or ``table``, another a custom_sql names); STAGING: the target's
    # database or schema, where staging tables are made anew each batch; RECORDS: the commit
    # records' table in its home (the records of a multi-table sink are not beside its tables)
    on: str = TARGET
    table: tuple[str, ...] | None = None


def needs(spec: JdbcSinkSpec, schema_changes: str | None, connected_to: str | None = None) -> list[Need]:
    """What the sink of ``spec`` does that needs a privilege; ``schema_changes``: the source's
    schema.change.behavior when it follows schema changes; ``connected_to``: the database the
    sink's session is connected to (MySQL: where its custom_sql's unqualified names resolve)."""
    found = [Need(p, why, on=where) for p, where, why in _ALWAYS]
    if spec.primary_keys:
        found.append(Need("UPDATE", "upserts or updates rows by primary_keys"))
        found.append(Need("DELETE", "applies DELETE changes by primary_keys"))
    if spec.data_save_mode == "DROP_DATA":
        found.append(Need("DELETE", "data_save_mode DROP_DATA empties the table before the first batch"))
    if spec.schema_save_mode == "RECREATE_SCHEMA":
        found.append(Need("DROP", "schema_save_mode RECREATE_SCHEMA drops the table before the first batch"))
        if spec.url.dialect != POSTGRESQL:      # save_modes._lock_tables: refused without it
            found.append(Need("LOCK TABLES", "schema_save_mode RECREATE_SCHEMA's DROP TABLE commits at once: the "
                              "table is locked while SeaTide checks that no pipeline keeps rows there and drops it "
                              "(without the lock the job is refused before anything is checked or destroyed)"))
    elif spec.data_save_mode == "CUSTOM_PROCESSING" and spec.table:
        found += custom_sql_needs(spec, connected_to)
    # Not required ahead: a change may never come, and lenient is every CDC source's default, so a role
    # that appends to a table it does not own was refused for an ALTER it would never run (outside review).
    # A change it cannot make fails at that change, naming the table, with nothing destroyed.
    if schema_changes in ("evolve", "try_evolve", "lenient"):
        found.append(Need("ALTER", f"schema.change.behavior {schema_changes} alters the target's columns",
                          required=False))
    found.append(Need("CREATE TEMPORARY TABLES", _TEMPORARY, required=False, on=STAGING))
    return found


def custom_sql_needs(spec: JdbcSinkSpec, connected_to: str | None) -> list[Need]:
    """What data_save_mode CUSTOM_PROCESSING's custom_sql asks of the user, asked with the rest before
    any table is emptied (a later table's custom_sql refused by the server left an earlier one emptied,
    outside review #3): a DML statement's (or TRUNCATE's) verb on the table it names; on MySQL a DDL
    statement's privilege and LOCK TABLES, under which it runs; on PostgreSQL owning the table, whose
    DDL is its owner's. A statement not told apart here is judged by the server when it runs (logged)."""
    sql, table, mysql = spec.custom_sql or "", spec.placed()[1], spec.url.dialect != POSTGRESQL
    runs = "data_save_mode CUSTOM_PROCESSING's custom_sql runs {} on {}"
    changed = changed_table(sql, fold=not mysql)
    if changed is not None and changed[0] != ("TRUNCATE" if mysql else "REPLACE"):     # MySQL: TRUNCATE is DDL
        verb, named = changed
        if mysql and len(named) == 1 and connected_to:     # where the sink's session resolves it
            named = (connected_to, *named)
        return [Need(privilege, runs.format(verb, ".".join(named)), table=named)
                for privilege in (("INSERT", "DELETE") if verb == "REPLACE" else (verb,))]
    found = []
    if mysql and spec.custom_sql_is_ddl:
        found.append(Need("LOCK TABLES", "data_save_mode CUSTOM_PROCESSING's custom_sql is DDL, which commits at "
                          "once: the table is locked while SeaTide checks that no pipeline keeps rows there and "
                          "runs it (without the lock the job is refused before anything is checked or destroyed)"))
    try:     # PostgreSQL: an unqualified name is taken for the target's (its search_path resolves it)
        statement = locked_statement(sql, table, connected_to if mysql else (table[0] if len(table) > 1 else None))
    except NotUnderLock:       # on MySQL refused with the sink's options already, where it cannot run
        statement = None
    if statement is not None:      # TRUNCATE asks DROP of the user, ALTER TABLE asks ALTER, ...
        found.append(Need(statement.privilege if mysql else "ALTER", runs.format(statement.what, "the table")))
    elif not spec.custom_sql_is_ddl or not mysql:
        log.info("Jdbc sink: SeaTide cannot tell which privileges custom_sql %r needs on %s; the server judges "
                 "it when it runs", sql.strip()[:200], ".".join(table))
    return found


def lacking(conn, spec: JdbcSinkSpec, table: tuple[str, ...] | None, schema_changes: str | None,
            connected_to: str | None, multi: bool) -> list[Lacking]:
    """The needs of ``spec``'s sink the server says its user lacks on ``table`` (as named through
    ``conn``), each privilege once, with what needs it; ``connected_to``: the database the sink's
    session connects to (MySQL). A single table's commit records are beside it, several tables'
    in the connection's database or schema (``JdbcTargets._home``)."""
    home = table[0] if table and len(table) > 1 and not multi else None
    user = _User(conn, spec.url.dialect)
    return [one for one, _grant in user.lacking(spec, table, schema_changes, home, connected_to)]


def lacking_grants(conn, targets: list[tuple[JdbcSinkSpec, tuple[str, ...], str]], records: str | None) -> list[str]:
    """Every privilege a target lacks that its job cannot run without (``targets``: (spec, table as
    named through ``conn``, label); ``records``: the database or schema its commit records live in,
    None: the connection's), each a line naming the table, the privilege, what needs it and the
    GRANT that gives it: the one check ``seatide check --connect`` asks, asked of every target of the
    job before the first is prepared (``refusal``). ALTER for schema changes is not asked: a change
    may never come (``needs``), and one the role cannot make fails at that change."""
    if not targets:
        return []
    user = _User(conn, targets[0][0].url.dialect)
    found: dict[tuple[str, str], tuple[Lacking, str]] = {}
    for spec, table, label in targets:
        for one, grant in user.lacking(spec, table, None, records, user.database):
            if one.required:
                found.setdefault((label, one.privilege), (one, grant))
    return [f"  {label}: {privilege} ({one.why}): {grant}" for (label, privilege), (one, grant) in found.items()]


def refusal(lines: list[str]) -> JdbcSinkError:
    """The sink refused before any target of the job is prepared: found at a later target's own step (or
    another sink's), a missing privilege left an earlier target already emptied or recreated (outside
    review, R-F)."""
    return JdbcSinkError("Jdbc sink: its user lacks privileges the job needs, asked of the server before any table is "
                         "prepared. Nothing was checked or destroyed. Grant them (or change the save modes that need "
                         "them) and run the job again:\n" + "\n".join(lines))


class _User:
    """The connection's user, as its server answers need by need (MySQL: its grants read once)."""

    def __init__(self, conn, dialect: str):
        self.conn, self.cursor, self.dialect = conn, conn.cursor(), dialect
        if dialect == POSTGRESQL:
            self.cursor.execute("SELECT current_user, current_schema(), current_database()")
            self.name, self.schema, self.database = self.cursor.fetchone()
            return
        self.cursor.execute("SELECT CURRENT_USER(), DATABASE()")
        account, self.database = self.cursor.fetchone()
        user, _, host = account.rpartition("@")
        self.name = f"'{user}'@'{host}'"
        self.grants = _mysql_grants(self.cursor)

    def lacking(self, spec: JdbcSinkSpec, table: tuple[str, ...] | None, schema_changes: str | None,
                records: str | None, connected_to: str | None) -> list[tuple[Lacking, str]]:
        """Each privilege ``spec``'s sink lacks once, with what needs it and the GRANTs that give it
        (``records``: the commit records' database or schema, None: the connection's)."""
        found: dict[str, Lacking] = {}
        grants: dict[str, list[str]] = {}
        for need in needs(spec, schema_changes, connected_to):
            if self._has(need, table, records):
                continue
            earlier = found.get(need.privilege)
            found[need.privilege] = Lacking(need.privilege, need.why, need.required) if earlier is None else \
                Lacking(need.privilege, f"{earlier.why}; {need.why}", earlier.required or need.required)
            grant = self._grant(need, table, records)
            if grant not in grants.setdefault(need.privilege, []):
                grants[need.privilege].append(grant)
        self.conn.rollback()
        return [(one, "; ".join(grants[one.privilege])) for one in found.values()]

    def _has(self, need: Need, table: tuple[str, ...] | None, records: str | None) -> bool:
        if self.dialect == POSTGRESQL:
            return _pg_has(self.cursor, need, need.table or table, records)
        if self.grants is None:      # unread (logged): the server judges each statement when it runs
            return True
        return _mysql_has(self.grants, need.privilege, *self._mysql_place(need, table, records))

    def _mysql_place(self, need: Need, table: tuple[str, ...] | None, records: str | None):
        """(database, table or None: the database itself) where MySQL is asked ``need``."""
        if need.on == RECORDS:       # updated and pruned by name: a grant on that table alone does
            return records or self.database, TABLE
        named = need.table or table
        database = named[0] if named and len(named) > 1 else self.database
        return database, (named[-1] if named and need.on == TARGET else None)

    def _grant(self, need: Need, table: tuple[str, ...] | None, records: str | None) -> str:
        """The statement that gives ``need`` to this user where it is asked."""
        if self.dialect == POSTGRESQL:
            return _pg_grant(need, need.table or table, self.name, records or self.schema, self.database)
        database, name = self._mysql_place(need, table, records)
        name = "*" if name is None or need.privilege in _MYSQL_DATABASE_WIDE else "`" + name + "`"
        return f"GRANT {need.privilege} ON `{database or '<database>'}`.{name} TO {self.name}"


_MYSQL_DATABASE_WIDE = ("LOCK TABLES", "CREATE TEMPORARY TABLES")      # granted on a database, never a table


# --- MySQL / MariaDB: the grants in effect in the session, as SHOW GRANTS lists them ------------

_GRANT = re.compile(r"^GRANT (?P<privileges>.+?) ON (?P<scope>\S+) TO ", re.IGNORECASE)


def _mysql_grants(cursor) -> list[tuple[set[str], str]] | None:
    """(privileges, scope) of each grant in effect for the session: the user's own and its enabled
    roles' (MariaDB's SHOW GRANTS lists the current role's, nested roles included; MySQL's lists
    them with USING). A role granted but not enabled gives nothing, and SHOW GRANTS FOR it needs
    access to ``mysql`` (1044: outside review #5). None where the grants cannot be read (logged)."""
    try:
        cursor.execute("SELECT VERSION()")
        sql = "SHOW GRANTS"
        if "MARIADB" not in str(cursor.fetchone()[0]).upper():
            cursor.execute("SELECT CURRENT_ROLE()")
            roles = str(cursor.fetchone()[0] or "NONE")
            sql = "SHOW GRANTS" if roles.upper() == "NONE" else f"SHOW GRANTS FOR CURRENT_USER() USING {roles}"
        cursor.execute(sql)
        lines = [line for (line,) in cursor.fetchall()]
    except Exception as exc:  # noqa: BLE001 - any refusal: the statements are judged when they run
        log.warning("Jdbc sink: the user's grants cannot be read (%s); the privileges the job needs are not "
                    "asked first, the server judges each statement when it runs", exc)
        return None
    found = []
    for line in lines:
        grant = _GRANT.match(line)
        if grant:
            privileges = {p.strip().upper() for p in re.sub(r"\([^)]*\)", "", grant.group("privileges")).split(",")}
            found.append((privileges, grant.group("scope")))
    return found


def _mysql_has(grants: list, privilege: str, database: str | None, table: str | None) -> bool:
    for privileges, scope in grants:
        if privilege not in privileges and not privileges & {"ALL", "ALL PRIVILEGES"}:
            continue
        db, _, name = scope.partition(".")
        if name == "*":          # a database-level grant: ``_`` and ``%`` in its name are wildcards
            if db == "*" or (database is not None and re.fullmatch(_pattern(db), database)):
                return True
        elif table is not None and _unquoted(db) == database and _unquoted(name) == table:
            return True          # a table-level grant names its database exactly
    return False


def _unquoted(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def _pattern(quoted: str) -> str:
    """A database-level grant's database name as a regex: ``_`` and ``%`` are wildcards unless escaped."""
    name, out, i = _unquoted(quoted), [], 0
    while i < len(name):
        if name[i] == "\\" and i + 1 < len(name):
            out.append(re.escape(name[i + 1]))
            i += 2
            continue
        out.append({"_": ".", "%": ".*"}.get(name[i], re.escape(name[i])))
        i += 1
    return "".join(out)


# --- PostgreSQL: asked privilege by privilege ----------------------------------------------------

def _pg_has(cursor, need: Need, table: tuple[str, ...] | None, records: str | None) -> bool:
    privilege = need.privilege
    if need.on == RECORDS:       # made by the sink (its owner: every privilege) unless there already
        return _pg_has_records(cursor, privilege, records)
    schema = table[0] if table and len(table) > 1 else None
    if need.on == STAGING and privilege == "DROP":
        return True              # its staging tables, which it made and owns
    if privilege == "CREATE TEMPORARY TABLES":
        cursor.execute("SELECT has_database_privilege(current_database(), 'TEMPORARY')")
    elif privilege == "CREATE":       # staging tables live in the target's schema
        return _pg_may_create_in(cursor, schema)
    elif privilege in ("DROP", "ALTER"):     # a table's DDL is its owner's
        if table is None:
            return True
        cursor.execute("SELECT COALESCE((SELECT pg_has_role(c.relowner, 'USAGE') FROM pg_class c "
                       "WHERE c.oid = to_regclass(%s)), true)", (_qualified(table),))
    else:
        if table is None:
            return True
        cursor.execute("SELECT COALESCE((SELECT has_table_privilege(c.oid, %s) FROM pg_class c "
                       "WHERE c.oid = to_regclass(%s)), true)", (privilege, _qualified(table)))
    return bool(cursor.fetchone()[0])


def _pg_has_records(cursor, privilege: str, schema: str | None) -> bool:
    """The commit records' table in ``schema`` (None: current_schema()): the DML on it where it exists
    (``CommitRecords.create`` then makes nothing), else CREATE in the schema (outside review #2: a
    multi-table sink's records are in the pinned current_schema(), not its tables' schema)."""
    cursor.execute("SELECT to_regclass(%s)", (_qualified((schema, TABLE)) if schema else _qualified((TABLE,)),))
    existing = cursor.fetchone()[0]
    if existing is None:
        return privilege != "CREATE" or _pg_may_create_in(cursor, schema)
    if privilege == "CREATE":
        return True
    cursor.execute("SELECT has_table_privilege(%s::regclass, %s)", (existing, privilege))
    return bool(cursor.fetchone()[0])


def _pg_may_create_in(cursor, schema: str | None) -> bool:
    cursor.execute("SELECT CASE WHEN n.oid IS NULL THEN has_database_privilege(current_database(), 'CREATE') "
                   "ELSE has_schema_privilege(n.oid, 'USAGE') AND has_schema_privilege(n.oid, 'CREATE') END "
                   "FROM (SELECT COALESCE(%s, current_schema()) AS name) s "
                   "LEFT JOIN pg_namespace n ON n.nspname = s.name", (schema,))
    return bool(cursor.fetchone()[0])


def _pg_grant(need: Need, table: tuple[str, ...] | None, role: str, records: str, database: str) -> str:
    """The statement that gives ``role`` what ``_pg_has`` asks for ``need`` (DROP, ALTER: owning the table;
    ``records``: the commit records' schema)."""
    privilege, role = need.privilege, _qualified((role,))
    if need.on == RECORDS:
        table, where = (records, TABLE), _qualified((records,))
    else:
        where = _qualified(((table[0] if table and len(table) > 1 else records) or "public",))
    quoted = _qualified(table) if table else "<table>"
    if privilege == "CREATE TEMPORARY TABLES":
        return f"GRANT TEMPORARY ON DATABASE {_qualified((database,))} TO {role}"
    if privilege == "CREATE":
        return f"GRANT USAGE, CREATE ON SCHEMA {where} TO {role}"
    if privilege in ("DROP", "ALTER"):
        return f"ALTER TABLE {quoted} OWNER TO {role}"
    return f"GRANT {privilege} ON TABLE {quoted} TO {role}"


def _qualified(table: tuple[str, ...]) -> str:
    return ".".join('"' + p.replace('"', '""') + '"' for p in table)


__all__ = ["Need", "lacking", "lacking_grants", "needs", "refusal"]
