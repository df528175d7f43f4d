"""Jdbc passwords written encrypted (env shade.identifier) reach the databases in clear, and only there.

A BATCH job reads a PostgreSQL table and a MariaDB table (as a user whose password MariaDB
checks; PostgreSQL here trusts local logins) into JSON files with ``seatide run``. The stored
job keeps the encrypted text; aes256 is decrypted by the driver with the key file it is given.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess

import pytest
from sqlalchemy import select

from seatide.config.shade import KEY_FILE_ENV, encrypt_config
from seatide.store import schema as s
from seatide.store.address import default_store_url
from seatide.store.db import open_store
from seatide.store.views import job_info
from tests.cli.test_local_run import ROOT, SEATIDE
from seatide.testing.jobs import assert_exactly, written_ids
from tests.databases.jobs import MARIADB_URL, PG_URL, mariadb_connect, pg_connect

pytestmark = pytest.mark.cluster

ROWS = 40


@pytest.fixture
def databases():
    """A PostgreSQL table, and a MariaDB table readable by a new user with a password."""
    suffix = secrets.token_hex(4)
    table, user, password = f"shade_{suffix}", f"shade_{suffix}", f"pw-{secrets.token_hex(8)}"
    with pg_connect() as pg:
        pg.execute(f"CREATE TABLE {table} AS SELECT g::bigint AS id FROM generate_series(0, {ROWS - 1}) AS g")
    with mariadb_connect() as db, db.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} (id bigint)")
        cur.execute(f"INSERT INTO {table} VALUES " + ",".join(f"({ROWS + i})" for i in range(ROWS)))
        cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
        cur.execute(f"GRANT SELECT ON test.{table} TO '{user}'@'%'")
    yield table, user, password
    with pg_connect() as pg:
        pg.execute(f"DROP TABLE IF EXISTS {table}")
    with mariadb_connect() as db, db.cursor() as cur:
        cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        cur.execute(f"DROP TABLE IF EXISTS {table}")


def _job(out: str, table: str, user: str, password: str, env: dict) -> dict:
    return {
        "env": {"job.mode": "BATCH", "job.retry.times": 0, "job.retry.interval.seconds": 1, **env},
        "source": [
            {"plugin_name": "Jdbc", "plugin_output": "pg", "url": PG_URL, "driver": "org.postgresql.Driver",
             "user": "postgres", "password": "not-checked-by-trust", "query": f"select id from {table}"},
            {"plugin_name": "Jdbc", "plugin_output": "maria", "url": MARIADB_URL, "driver": "org.mariadb.jdbc.Driver",
             "user": user, "password": password, "query": f"select id from {table}"}],
        "sink": [
            {"plugin_name": "LocalFile", "plugin_input": "pg", "path": f"{out}/pg", "file_format_type": "json"},
            {"plugin_name": "LocalFile", "plugin_input": "maria", "path": f"{out}/maria", "file_format_type": "json"}],
    }


def _stored_config(data_dir: str, job_id: str) -> str:
    store = open_store(default_store_url(data_dir))
    try:
        with store.read() as conn:
            return conn.execute(select(s.jobs.c.config).where(s.jobs.c.job_id == job_id)).scalar()
    finally:
        store.dispose()


@pytest.mark.parametrize("shade", ["base64", "aes256"])
def test_shaded_jdbc_passwords_are_decrypted_where_the_job_runs(tmp_path, databases, shade):
    table, user, password = databases
    out, data_dir = str(tmp_path / "out"), str(tmp_path / "data")
    env = {"shade.identifier": shade}
    run_env = dict(os.environ)
    if shade == "aes256":
        key = tmp_path / "shade.key"
        key.write_text(base64.b64encode(os.urandom(32)).decode())
        run_env[KEY_FILE_ENV] = str(key)
        os.environ[KEY_FILE_ENV] = str(key)       # for encrypt_config below only
    try:
        shaded = encrypt_config(_job(out, table, user, password, env))
    finally:
        os.environ.pop(KEY_FILE_ENV, None)
    assert password not in json.dumps(shaded)
    conf = tmp_path / "job.json"
    conf.write_text(json.dumps(shaded))
    job_id = f"shade-{shade}"
    result = subprocess.run([*SEATIDE, "run", str(conf), "--job-id", job_id, "--data-dir", data_dir],
                            capture_output=True, text=True, cwd=ROOT, env=run_env, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert_exactly(written_ids(f"{out}/pg"), range(ROWS))
    assert_exactly(written_ids(f"{out}/maria"), range(ROWS, 2 * ROWS))
    stored = _stored_config(data_dir, job_id)
    assert password not in stored and shaded["source"][1]["password"] in stored


def test_a_wrong_password_fails_the_job_at_once_with_the_databases_refusal(tmp_path, databases):
    """A refused login is permanent: with retries allowed, the first attempt fails the job (no
    driver started again after a back-off), and the database's refusal is what the user reads."""
    table, user, _ = databases
    job = _job(str(tmp_path / "out"), table, user, "wrong", {"shade.identifier": "base64", "job.retry.times": 3})
    conf = tmp_path / "job.json"
    conf.write_text(json.dumps(encrypt_config(job)))
    data_dir = str(tmp_path / "data")
    result = subprocess.run([*SEATIDE, "run", str(conf), "--job-id", "wrongpw", "--data-dir", data_dir],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-3000:]
    assert "Access denied" in result.stdout + result.stderr
    store = open_store(default_store_url(data_dir))
    try:
        with store.read() as conn:
            info = job_info(conn, "wrongpw")
    finally:
        store.dispose()
    assert info["jobStatus"] == "FAILED" and "Access denied" in info["errorMsg"], info["errorMsg"]
    assert info["retriesUsed"] == 0 and len(info["attempts"]) == 1, (info["retriesUsed"], info["attempts"])
