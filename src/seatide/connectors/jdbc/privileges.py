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

from seatide.connectors.jdbc.spec import JdbcSinkSpec
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
    if schema_changes in ("evolve", "try_evolve", "lenient"):
        found.append(Need("ALTER", f"schema.change.behavior {schema_changes} alters the target's columns"))
    found.append(Need("CREATE TEMPORARY TABLES", _TEMPORARY, required=False, target=False))
    return found


def lacking(conn, spec: JdbcSinkSpec, table: tuple[str, ...] | None, schema_changes: str | None) -> list[Lacking]:
    """The needs of ``spec``'s sink the server says its user lacks on ``table`` (as named through
    ``conn``), each privilege once, with what needs it."""
    cursor = conn.cursor()
    wanted = needs(spec, schema_changes)
    if spec.url.dialect == POSTGRESQL:
        def has(need: Need) -> bool:
            return _pg_has(cursor, need, table)
    else:
        grants = _mysql_grants(cursor)
        cursor.execute("SELECT DATABASE()")
        database = table[0] if table and len(table) > 1 else cursor.fetchone()[0]

        def has(need: Need) -> bool:
            return _mysql_has(grants, need.privilege, database, table[-1] if table else None)
    found: dict[str, Lacking] = {}
    for need in wanted:
        if has(need):
            continue
        earlier = found.get(need.privilege)
        found[need.privilege] = Lacking(need.privilege, need.why, need.required) if earlier is None else \
            Lacking(need.privilege, f"{earlier.why}; {need.why}", earlier.required or need.required)
    conn.rollback()
    return list(found.values())


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


def _qualified(table: tuple[str, ...]) -> str:
    return ".".join('"' + p.replace('"', '""') + '"' for p in table)


__all__ = ["Need", "lacking", "needs"]
