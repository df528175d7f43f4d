"""A private MariaDB with the binary log on, for change-data-capture tests and benches.

The shared MariaDB on 3306 runs without ``log_bin``, and CDC tests purge binary logs,
which no shared server should suffer. So each test session installs a throw-away data
directory and runs its own ``mariadbd`` on a free port, with row-based logging of full
row images, and stops it at the end even when tests fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass

import pymysql
import pytest

from seatide.testing.cluster import free_port

STARTUP_DEADLINE_S = 60.0


@dataclass(frozen=True)
class PrivateMariaDB:
    host: str
    port: int
    user: str
    password: str
    datadir: str

    @property
    def url(self) -> str:
        return f"jdbc:mariadb://{self.host}:{self.port}/test"

    def connect(self, database: str | None = "test", autocommit: bool = True):
        return pymysql.connect(host=self.host, port=self.port, user=self.user, password=self.password,
                               database=database, autocommit=autocommit)

    def execute(self, *statements: str) -> None:
        with self.connect() as conn, conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)



def start_private_mariadb(workdir: str) -> tuple[PrivateMariaDB, subprocess.Popen]:
    """Install a data directory under ``workdir`` and start mariadbd on it; wait until it answers."""
    datadir = os.path.join(workdir, "data")
    log = os.path.join(workdir, "mariadbd.log")
    install = subprocess.run(
        ["mariadb-install-db", "--no-defaults", f"--datadir={datadir}", "--user=root",
         "--auth-root-authentication-method=normal", "--skip-test-db"],
        capture_output=True, text=True)
    if install.returncode != 0:
        raise RuntimeError(f"mariadb-install-db failed:\n{install.stdout}\n{install.stderr}")
    port = free_port()
    process = subprocess.Popen(
        ["mariadbd", "--no-defaults", f"--datadir={datadir}", "--user=root",
         f"--socket={workdir}/mariadbd.sock", f"--pid-file={workdir}/mariadbd.pid",
         f"--port={port}", "--bind-address=127.0.0.1", f"--log-error={log}",
         f"--log-bin={workdir}/binlog", "--binlog-format=ROW", "--binlog-row-image=FULL",
         "--binlog-row-metadata=FULL", "--server-id=1", "--innodb-buffer-pool-size=32M",
         "--innodb-log-file-size=16M", "--performance-schema=OFF", "--skip-name-resolve"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = PrivateMariaDB("127.0.0.1", port, "root", "", datadir)
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    while True:
        try:
            with server.connect(database=None) as conn, conn.cursor() as cur:
                cur.execute("CREATE DATABASE IF NOT EXISTS test")
            return server, process
        except pymysql.err.OperationalError:
            if process.poll() is not None or time.monotonic() > deadline:
                stop_private_mariadb(process)
                tail = open(log).read()[-2000:] if os.path.exists(log) else ""
                raise RuntimeError(f"private mariadbd did not start on port {port}:\n{tail}") from None
            time.sleep(0.1)


def stop_private_mariadb(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def private_mariadb():
    workdir = tempfile.mkdtemp(prefix="seatide-mysql-cdc-")
    process = None
    try:
        server, process = start_private_mariadb(workdir)
        yield server
    finally:
        if process is not None:
            stop_private_mariadb(process)
        shutil.rmtree(workdir, ignore_errors=True)
