"""What a Jdbc sink's user must be allowed to do, mode by mode, and which of it the server says the
user lacks (``seatide check --connect``; docs/connectors/jdbc-sink.md, "Privileges").

SeaTunnel's MySQL sink user has SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX and ALTER on
the target databases; a job SeaTunnel runs with those, SeaTide runs with those (issue 32). One
privilege more helps and is not needed: CREATE TEMPORARY TABLES (PostgreSQL: TEMPORARY on the
database), without which small batches are staged into ordinary tables (temporary_tables.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from seatide.connectors.jdbc.spec import JdbcSinkError, JdbcSinkSpec
from seatide.connectors.jdbc.step_statement import NotUnderLock, locked_statement
from seatide.connectors.jdbc.url import POSTGRESQL
from seatide.plugin.base import Lacking

_ALWAYS = (    # (privilege, on the target table itself, why)
    ("SELECT", True, "reads the target and its commit records (seatide_sink_commits)"),
    ("INSERT", True, "writes the rows, and each batch's commit record"),
    ("UPDATE", False, "sets a batch's row count on its commit record"),
    ("DELETE", False, "forgets commit records older than checkpoint.retained"),
    ("CREATE", False, "makes its commit-record table, and a staging table for each batch"),
    ("DROP", False, "drops its staging tables"),
)
_TEMPORARY = "stages a small batch collected on the driver inside the batch's transaction; without it, " \
             "into an ordinary staging table made before the transaction"


@dataclass(frozen=True)
class Need:
    privilege: str      # as MySQL names it; PostgreSQL's checks follow from it (``_pg_has``)
    why: str
    required: bool = True
    target: bool = True     # on the target table (else on the sink's own tables, or its schema)


def needs(spec: JdbcSinkSpec, schema_changes: str | None) -> list[Need]:
    """What the sink of ``spec`` does that needs a privilege; ``schema_changes``: the source's
    schema.change.behavior when it follows schema changes."""
    found = [Need(p, why, target=on_target) for p, on_target, why in _ALWAYS]
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
    elif spec.data_save_mode == "CUSTOM_PROCESSING" and spec.custom_sql_is_ddl and spec.url.dialect != POSTGRESQL:
        found.append(Need("LOCK TABLES", "data_save_mode CUSTOM_PROCESSING's custom_sql is DDL, which commits at "
                          "once: the table is locked while SeaTide checks that no pipeline keeps rows there and "
                          "runs it (without the lock the job is refused before anything is checked or destroyed)"))
        statement = _locked_statement(spec)
        if statement is not None:      # TRUNCATE asks DROP of the user, ALTER TABLE asks ALTER, ...
            found.append(Need(statement.privilege, f"data_save_mode CUSTOM_PROCESSING's custom_sql runs "
                              f"{statement.what} on the table"))
    if schema_changes in ("evolve", "try_evolve", "lenient"):
        found.append(Need("ALTER", f"schema.change.behavior {schema_changes} alters the target's columns"))
    found.append(Need("CREATE TEMPORARY TABLES", _TEMPORARY, required=False, target=False))
    return found


def _locked_statement(spec: JdbcSinkSpec):
    """What a DDL custom_sql is (step_statement.py; None: one the sink's options refused already)."""
    try:
        return locked_statement(spec.custom_sql or "", spec.placed()[1], spec.url.database) if spec.table else None
    except NotUnderLock:
        return None


def lacking(conn, spec: JdbcSinkSpec, table: tuple[str, ...] | None, schema_changes: str | None) -> list[Lacking]:
    """The needs of ``spec``'s sink the server says its user lacks on ``table`` (as named through
    ``conn``), each privilege once, with what needs it."""
    return [one for one, _grant in _User(conn, spec.url.dialect).lacking(spec, table, schema_changes)]


def lacking_grants(conn, targets: list[tuple[JdbcSinkSpec, tuple[str, ...], str]]) -> list[str]:
    """Every privilege a target lacks that its job cannot run without (``targets``: (spec, table as
    named through ``conn``, label)), each a line naming the table, the privilege, what needs it and
    the GRANT that gives it: the one check ``seatide check --connect`` asks, asked of every target
    of a sink before the first is prepared (``refusal``). ``schema.change.behavior`` is not known
    there: ALTER for schema changes is not asked."""
    if not targets:
        return []
    user = _User(conn, targets[0][0].url.dialect)
    found: dict[tuple[str, str], tuple[Lacking, str]] = {}
    for spec, table, label in targets:
        for one, grant in user.lacking(spec, table, None):
            if one.required:
                found.setdefault((label, one.privilege), (one, grant))
    return [f"  {label}: {privilege} ({one.why}): {grant}" for (label, privilege), (one, grant) in found.items()]


def refusal(lines: list[str]) -> JdbcSinkError:
    """The sink refused before any target is prepared: found at a later target's own step, a missing
    privilege left an earlier target already emptied or recreated (outside review, R-F)."""
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
        self.grants = _mysql_grants(self.cursor)
        self.cursor.execute("SELECT CURRENT_USER(), DATABASE()")
        account, self.database = self.cursor.fetchone()
        user, _, host = account.rpartition("@")
        self.name = f"'{user}'@'{host}'"

    def lacking(self, spec: JdbcSinkSpec, table: tuple[str, ...] | None,
                schema_changes: str | None) -> list[tuple[Lacking, str]]:
        """Each privilege ``spec``'s sink lacks on ``table`` once, with what needs it and its GRANT."""
        found: dict[str, Lacking] = {}
        on_table: dict[str, bool] = {}      # every need of the privilege is on the target table alone
        for need in needs(spec, schema_changes):
            if self._has(need, table):
                continue
            earlier = found.get(need.privilege)
            found[need.privilege] = Lacking(need.privilege, need.why, need.required) if earlier is None else \
                Lacking(need.privilege, f"{earlier.why}; {need.why}", earlier.required or need.required)
            on_table[need.privilege] = on_table.get(need.privilege, True) and need.target
        self.conn.rollback()
        return [(one, self._grant(one.privilege, on_table[one.privilege], table)) for one in found.values()]

    def _has(self, need: Need, table: tuple[str, ...] | None) -> bool:
        if self.dialect == POSTGRESQL:
            return _pg_has(self.cursor, need, table)
        database = table[0] if table and len(table) > 1 else self.database
        if need.target:
            return _mysql_has(self.grants, need.privilege, database, table[-1] if table else None)
        # the sink's own tables: its commit records, updated and pruned by name; staging tables, named anew
        # each batch, made and dropped under a grant on the database (a job with DELETE on the records
        # alone and APPEND_DATA runs: it must not be refused for DELETE on the target)
        own = "seatide_sink_commits" if need.privilege in ("UPDATE", "DELETE") else None
        return _mysql_has(self.grants, need.privilege, database, own)

    def _grant(self, privilege: str, on_table: bool, table: tuple[str, ...] | None) -> str:
        """The statement that gives ``privilege`` to this user on ``table`` (``on_table``: else on its database)."""
        if self.dialect == POSTGRESQL:
            return _pg_grant(privilege, table, self.name, self.schema, self.database)
        database = "`" + (table[0] if table and len(table) > 1 else self.database or "<database>") + "`"
        on_table = on_table and table and privilege not in _MYSQL_DATABASE_WIDE
        return f"GRANT {privilege} ON {database}.{'`' + table[-1] + '`' if on_table else '*'} TO {self.name}"


_MYSQL_DATABASE_WIDE = ("LOCK TABLES", "CREATE TEMPORARY TABLES")      # granted on a database, never a table


# --- MySQL / MariaDB: the user's grants as SHOW GRANTS lists them, roles included ---------------

_GRANT = re.compile(r"^GRANT (?P<privileges>.+?) ON (?P<scope>\S+) TO ", re.IGNORECASE)
_ROLE = re.compile(r"^GRANT (?P<role>`[^`]+`(@`[^`]*`)?|'[^']+') TO ", re.IGNORECASE)


def _mysql_grants(cursor, role: str | None = None, seen: set | None = None) -> list[tuple[set[str], str]]:
    """(privileges, scope) of each grant to the current user (or ``role``), and of its roles."""
    seen = seen if seen is not None else set()
    cursor.execute("SHOW GRANTS" if role is None else f"SHOW GRANTS FOR {role}")
    found = []
    for (line,) in cursor.fetchall():
        grant = _GRANT.match(line)
        if grant:
            privileges = {p.strip().upper() for p in re.sub(r"\([^)]*\)", "", grant.group("privileges")).split(",")}
            found.append((privileges, grant.group("scope")))
            continue
        named = _ROLE.match(line)
        if named and named.group("role") not in seen:
            seen.add(named.group("role"))
            found += _mysql_grants(cursor, named.group("role"), seen)
    return found


def _mysql_has(grants: list, privilege: str, database: str | None, table: str | None) -> bool:
    for privileges, scope in grants:
        if privilege not in privileges and not privileges & {"ALL", "ALL PRIVILEGES"}:
            continue
        db, _, name = scope.partition(".")
        if db == "*" or (database is not None and re.fullmatch(_pattern(db), database)):
            if name == "*" or (table is not None and name.strip("`") == table):
                return True
    return False


def _pattern(quoted: str) -> str:
    """A grant's database name as a regex: ``_`` and ``%`` are wildcards unless escaped."""
    name, out, i = quoted.strip("`"), [], 0
    while i < len(name):
        if name[i] == "\\" and i + 1 < len(name):
            out.append(re.escape(name[i + 1]))
            i += 2
            continue
        out.append({"_": ".", "%": ".*"}.get(name[i], re.escape(name[i])))
        i += 1
    return "".join(out)


# --- PostgreSQL: asked privilege by privilege ----------------------------------------------------

def _pg_has(cursor, need: Need, table: tuple[str, ...] | None) -> bool:
    schema, privilege = (table[0] if table and len(table) > 1 else None), need.privilege
    if not need.target and privilege in ("UPDATE", "DELETE", "DROP"):
        return True              # on the sink's own tables, which CREATE on the schema lets it make
    if privilege == "CREATE TEMPORARY TABLES":
        cursor.execute("SELECT has_database_privilege(current_database(), 'TEMPORARY')")
    elif privilege == "CREATE":       # commit records and staging tables live in the target's schema
        cursor.execute("SELECT CASE WHEN n.oid IS NULL THEN has_database_privilege(current_database(), 'CREATE') "
                       "ELSE has_schema_privilege(n.oid, 'USAGE') AND has_schema_privilege(n.oid, 'CREATE') END "
                       "FROM (SELECT COALESCE(%s, current_schema()) AS name) s "
                       "LEFT JOIN pg_namespace n ON n.nspname = s.name", (schema,))
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


def _pg_grant(privilege: str, table: tuple[str, ...] | None, role: str, schema: str | None, database: str) -> str:
    """The statement that gives ``role`` what ``_pg_has`` asks for ``privilege`` (DROP, ALTER: owning the table)."""
    quoted = _qualified(table) if table else "<table>"
    role, where = _qualified((role,)), _qualified(((table[0] if table and len(table) > 1 else schema) or "public",))
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
