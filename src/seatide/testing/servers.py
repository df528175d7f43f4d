"""Throw-away database servers of our own: in a temporary directory, on a free port.

PostgreSQL (``PrivatePostgres``) and MariaDB with a row binlog (``start_private_mariadb``).

For what the shared server cannot be used for: CDC needs ``wal_level = logical``, and the chaos
runner stops and restarts its store (``stop_server`` / ``start_server`` keep the data).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass

from seatide.testing.cluster import free_port
from seatide.testing.pg_tablespace import memory_room



def _postgres_bin() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin")
    return os.path.dirname(found[-1])


# Where a private server's skewed clock lives (``PrivatePostgres.clock_offset``).
SKEWED_CLOCK_SCHEMA = "seatide_skewed_clock"
_OFFSET_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def offset_seconds(offset: str | None) -> float:
    """``+8s``, ``-3s``, ``+2m`` (or plain seconds) as seconds; None is 0."""
    if not offset:
        return 0.0
    unit = _OFFSET_UNITS.get(offset[-1])
    return float(offset[:-1]) * unit if unit else float(offset)


class PrivatePostgres:
    """A PostgreSQL server with logical decoding on, owned by the ``postgres`` OS user."""

    def __init__(self, also_listen_on: str | None = None, also_trust: str | None = None,
                 clock_offset: str | None = None):
        """``also_listen_on``: one more address to accept TCP on (a partition's host end), and
        ``also_trust``: the network allowed in from there (its /30), without a password.
        ``clock_offset``: the store's clock is this far (``+8s``, ``-8s``) from SeaTide's
        hosts': ``clock_timestamp()``, the one instant SeaTide reads from the store
        (``store/clock.py``), is the server's own moved by it, in every database (applied at
        each start and restart, so it may be changed in between).

        Not libfaketime on the server, as it once was: libfaketime gives a signal handler that
        interrupts ``epoll_wait`` the real clock (measured, 2026-11-29), and PostgreSQL's
        SIGALRM handler compares that with deadlines it set on the faked one. With the clock
        8 s behind, every timeout due within 8 s fired at the server's next alarm: sessions idle
        inside a transaction for 0.1 s were ended for idle-in-transaction (5 s), 44 in a
        minute of short transactions, none without the fake (issue 31)."""
        self.also_listen_on, self.also_trust = also_listen_on, also_trust
        self.clock_offset = clock_offset
        self._clock_set = False
        self.bin = _postgres_bin()
        # In memory where there is room: initdb writes ~1,000 files and each database made on the
        # server ~300 more, which on ext4 cost the kernel several times the CPU (testing/pg_tablespace.py).
        self.root = tempfile.mkdtemp(prefix="seatide-pgcdc-", dir=memory_room())
        self.data = os.path.join(self.root, "data")
        self.port = free_port()
        self.url = f"jdbc:postgresql://127.0.0.1:{self.port}/postgres"

    def _as_postgres(self, *args: str) -> None:
        # initdb and postgres refuse to run as root
        command = list(args) if os.geteuid() != 0 else ["runuser", "-u", "postgres", "--", *args]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def start(self) -> "PrivatePostgres":
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self._as_postgres(os.path.join(self.bin, "initdb"), "-D", self.data, "-U", "postgres",
                          "--auth=trust", "-E", "UTF8", "--no-sync")
        listen = ",".join(a for a in ("127.0.0.1", self.also_listen_on) if a)
        settings = {"wal_level": "logical", "max_replication_slots": "20", "max_wal_senders": "10",
                    "port": str(self.port), "listen_addresses": f"'{listen}'",
                    "unix_socket_directories": f"'{self.root}'", "fsync": "off",
                    "shared_buffers": "32MB", "max_connections": "50"}
        with open(os.path.join(self.data, "postgresql.conf"), "a", encoding="utf-8") as conf:
            conf.writelines(f"{key} = {value}\n" for key, value in settings.items())
        if self.also_trust:
            with open(os.path.join(self.data, "pg_hba.conf"), "a", encoding="utf-8") as hba:
                hba.write(f"host all all {self.also_trust} trust\n")
        self.start_server()
        return self

    def stop_server(self) -> None:
        """Stop as a crash would (immediate mode), keeping the data for ``start_server``."""
        try:
            self._as_postgres(os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "immediate", "-w", "stop")
        except subprocess.CalledProcessError:
            pass  # never started, or already gone

    def start_server(self) -> None:
        self._as_postgres(os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-l",
                          os.path.join(self.root, "server.log"), "-w", "-t", "60", "start")
        self._set_clock()

    def restart_server(self, mode: str = "fast") -> None:
        """Restart as an operator or a managed failover would: every session ends (and with it
        every advisory lock), the data stays. ``fast`` rolls back open transactions."""
        self._as_postgres(os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", mode, "-l",
                          os.path.join(self.root, "server.log"), "-w", "-t", "60", "restart")
        self._set_clock()

    def _set_clock(self) -> None:
        """``clock_timestamp()`` moved by ``clock_offset`` in every database there is and every
        one created later (template1): a function of that name in a schema of its own, which
        the search path puts before pg_catalog's. A server never given an offset is left alone."""
        if self.clock_offset is None and not self._clock_set:
            return
        self._clock_set = True
        seconds = offset_seconds(self.clock_offset)
        with self.connect() as admin:
            admin.execute(f"ALTER ROLE postgres SET search_path = \"$user\", public, {SKEWED_CLOCK_SCHEMA}, "
                          "pg_catalog")
            databases = [row[0] for row in admin.execute("SELECT datname FROM pg_database WHERE datallowconn")]
        for dbname in databases:
            with self.connect(dbname) as conn:
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SKEWED_CLOCK_SCHEMA}")
                conn.execute(f"CREATE OR REPLACE FUNCTION {SKEWED_CLOCK_SCHEMA}.clock_timestamp() RETURNS timestamptz "
                             f"LANGUAGE sql VOLATILE AS $$ SELECT pg_catalog.clock_timestamp() "
                             f"+ make_interval(secs => {seconds!r}) $$")

    def stop(self) -> None:
        self.stop_server()
        shutil.rmtree(self.root, ignore_errors=True)

    def connect(self, dbname: str = "postgres"):
        import psycopg

        return psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname=dbname,
                               autocommit=True)

    def drop_database(self, dbname: str) -> None:
        """Drop a test's database and the replication slots its CDC jobs left (a slot keeps
        WAL, and a database with a slot cannot be dropped)."""
        with self.connect() as admin:
            for (slot,) in admin.execute("SELECT slot_name FROM pg_replication_slots WHERE database = %s",
                                         (dbname,)).fetchall():
                admin.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
            admin.execute(f"DROP DATABASE {dbname} WITH (FORCE)")


# -- MariaDB with the binary log on (change data capture) ---------------------------------
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
        import pymysql

        # ssl_disabled: PyMySQL 1.2 otherwise builds a TLS context at every connect (the system's
        # CA bundle read again: ~0.4 s and ~45 ms of CPU) for a loopback server that has no TLS
        return pymysql.connect(host=self.host, port=self.port, user=self.user, password=self.password,
                               database=database, autocommit=autocommit, ssl_disabled=True)

    def execute(self, *statements: str) -> None:
        with self.connect() as conn, conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)



def start_private_mariadb(workdir: str, server_id: int = 1,
                          extra_args: tuple[str, ...] = ()) -> tuple[PrivateMariaDB, subprocess.Popen]:
    """Install a data directory under ``workdir`` and start mariadbd on it; wait until it answers.
    A replica needs its own ``server_id`` (and ``--log-slave-updates`` in ``extra_args`` to log what
    it replicates)."""
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
         "--binlog-row-metadata=FULL", f"--server-id={server_id}", "--innodb-buffer-pool-size=32M",
         "--innodb-log-file-size=16M", "--performance-schema=OFF", "--skip-name-resolve", *extra_args],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import pymysql

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
