"""The privileges asked of the server before any table is prepared are the ones in effect where the
sink uses them (outside review of 960fd7e, #5 and #10): a role's grants count when the role is
enabled, a table-level grant names its database exactly, and the commit records' own table is asked
where another role owns it. Real MariaDB and PostgreSQL, through ``seatide check --connect``."""

from __future__ import annotations

import secrets

from tests.connectors.test_jdbc_sink_privileges import _admin, _check, _mariadb_user, _pg_admin, _pg_role


def test_a_default_roles_grants_count_and_a_role_not_enabled_gives_nothing(tmp_path, capsys):
    """A role granted but not enabled is not SHOWn FOR (MariaDB 1044): its grants are not in effect,
    so the check names what the user's own grants lack; the default role's grants are in effect."""
    enabled, idle = f"r_{secrets.token_hex(3)}", f"r_{secrets.token_hex(3)}"
    with _mariadb_user("SELECT", "`DB`.*") as (db, password):
        name, user = db[0].rsplit("/", 1)[1], db[1]
        _admin(f"CREATE ROLE {enabled}", f"CREATE ROLE {idle}", f"GRANT ALL PRIVILEGES ON {name}.* TO {idle}",
               f"GRANT {idle} TO '{user}'@'%'")
        try:
            code, report = _check(tmp_path, capsys, db, password)
            assert code == 1 and "INSERT" in {p["privilege"] for p in report["privileges"]}, report
            _admin(f"GRANT ALL PRIVILEGES ON {name}.* TO {enabled}", f"GRANT {enabled} TO '{user}'@'%'",
                   f"SET DEFAULT ROLE {enabled} FOR '{user}'@'%'")
            code, report = _check(tmp_path, capsys, db, password)
            assert code == 0, report
        finally:
            _admin(f"DROP ROLE IF EXISTS {enabled}", f"DROP ROLE IF EXISTS {idle}")


def test_a_table_level_grant_does_not_match_another_database_by_its_underscore(tmp_path, capsys):
    """MySQL takes ``_`` and ``%`` as wildcards in a database-level grant's name only: SELECT and INSERT
    on `st_a_b`.`t` give nothing on `st_axb`.`t`."""
    tag = secrets.token_hex(3)
    exact, other = f"st_{tag}_b", f"st_{tag}xb"
    with _mariadb_user("ALL PRIVILEGES", "`DB`.*") as (db, password):
        _admin(f"CREATE DATABASE {exact}", f"CREATE DATABASE {other}", f"CREATE TABLE {exact}.t (id BIGINT)",
               f"CREATE TABLE {other}.t (id BIGINT)", f"GRANT SELECT, INSERT ON {exact}.t TO '{db[1]}'@'%'")
        try:
            code, report = _check(tmp_path, capsys, db, password, database=other)
        finally:
            _admin(f"DROP DATABASE IF EXISTS {exact}", f"DROP DATABASE IF EXISTS {other}")
    lacking = {p["privilege"] for p in report["privileges"]}
    assert code == 1 and {"SELECT", "INSERT"} <= lacking, report


def test_postgresql_commit_records_another_role_owns_are_asked_for_update_and_delete(tmp_path, capsys):
    """The sink's own seatide_sink_commits is not always its own: made by another role, the sink's
    role may only read and insert there, and its batches' UPDATE and pruning DELETE would fail later."""
    with _pg_role() as (database, role):
        _pg_admin(database, f"GRANT USAGE, CREATE ON SCHEMA public TO {role}", "CREATE TABLE public.t (id BIGINT)",
                  f"GRANT SELECT, INSERT ON public.t TO {role}",
                  "CREATE TABLE public.seatide_sink_commits (transaction_id VARCHAR(255) PRIMARY KEY, "
                  "sink_id VARCHAR(255) NOT NULL, batch_id BIGINT NOT NULL, row_count BIGINT NOT NULL, "
                  "committed_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)",
                  f"GRANT SELECT, INSERT ON public.seatide_sink_commits TO {role}")
        code, report = _check(tmp_path, capsys, (f"jdbc:postgresql://127.0.0.1:5432/{database}", role), "pw")
    lacking = {p["privilege"]: p for p in report["privileges"]}
    assert code == 1 and {"UPDATE", "DELETE"} <= set(lacking), report
    assert "commit record" in lacking["UPDATE"]["why"], report


def test_a_dml_custom_sql_is_asked_its_verb_on_its_table(tmp_path, capsys):
    """MariaDB: REPLACE asks INSERT and DELETE (there is no REPLACE privilege), which SeaTunnel's user
    has; PostgreSQL: a role that may not DELETE from the table its custom_sql empties is named."""
    with _mariadb_user("SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER", "`DB`.*") as (db, password):
        code, report = _check(tmp_path, capsys, db, password, data_save_mode="CUSTOM_PROCESSING",
                              custom_sql="REPLACE INTO t (id) VALUES (1)")
        assert code == 0, report
    with _pg_role() as (database, role):
        _pg_admin(database, f"GRANT USAGE, CREATE ON SCHEMA public TO {role}", "CREATE TABLE public.t (id BIGINT)",
                  f"GRANT SELECT, INSERT ON public.t TO {role}")
        code, report = _check(tmp_path, capsys, (f"jdbc:postgresql://127.0.0.1:5432/{database}", role), "pw",
                              data_save_mode="CUSTOM_PROCESSING", custom_sql="DELETE FROM t")
    lacking = {p["privilege"]: p for p in report["privileges"]}
    assert code == 1 and "custom_sql runs DELETE on t" in lacking["DELETE"]["why"], report
