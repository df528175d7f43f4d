"""A Spark task run again after its first try's rows were committed into the staging table
(a speculative copy, an executor lost after the task's commit) never puts a row of a keyless
target in twice.

Spark's JDBC write commits each partition's rows in one transaction at its task's end, and
nothing ties that commit to the task's success: a task whose commit landed on the server but
whose answer was lost (the connection cut right after it) fails, and is run again, and its
partition's rows are staged twice. A keyed sink applies each key's last change, which a change
staged twice does not alter; a keyless one inserted every staged row. Here a TCP proxy between
Spark and PostgreSQL loses the server's answer to the first COMMIT of a staging write (once),
and the session retries tasks (``local[2,3]``, in a process of its own: the shared session's
``local[2]`` runs a task once).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import threading

import pytest

from seatide.connectors.jdbc.url import JdbcUrl

pytestmark = pytest.mark.cluster

_STAGING_INSERT = re.compile(rb"INSERT INTO[^\x00]*seatide_stage_[^\x00]*VALUES")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class CommitAnswerLost:
    """A TCP proxy to PostgreSQL (127.0.0.1:5432) that, once, lets a staging writer's COMMIT reach
    the server and then cuts the connection before the server's answer reaches the client."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lost = threading.Event()
        self._once = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", 5432))
            state = {"stager": False, "cut": False}
            threading.Thread(target=self._to_server, args=(client, server, state), daemon=True).start()
            threading.Thread(target=self._to_client, args=(server, client, state), daemon=True).start()

    def _to_server(self, client, server, state) -> None:
        tail = b""
        while data := _recv(client):
            seen, tail = tail + data, (tail + data)[-256:]
            if _STAGING_INSERT.search(seen):
                state["stager"] = True
            if state["stager"] and b"COMMIT\x00" in seen and not self.lost.is_set() and self._once.acquire(False):
                state["cut"] = True
            _send(server, data)
        _close(client, server)

    def _to_client(self, server, client, state) -> None:
        while data := _recv(server):
            if state["cut"] and b"COMMIT\x00" in data:     # CommandComplete: committed on the server
                self.lost.set()
                break
            _send(client, data)
        _close(client, server)

    def close(self) -> None:
        self.listener.close()


def _recv(sock) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def _send(sock, data: bytes) -> None:
    try:
        sock.sendall(data)
    except OSError:
        pass


def _close(*socks) -> None:
    for sock in socks:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()


@pytest.fixture
def database():
    name = f"fix30_rerun_{secrets.token_hex(4)}"
    admin = JdbcUrl.parse("jdbc:postgresql://127.0.0.1:5432/test").connect("postgres", autocommit=True)
    admin.cursor().execute(f"CREATE DATABASE {name}")
    yield name
    admin.cursor().execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    admin.close()


def test_a_task_run_again_after_its_staging_commit_puts_each_row_in_a_keyless_target_once(database, tmp_path):
    proxy = CommitAnswerLost()
    try:
        url = f"jdbc:postgresql://127.0.0.1:{proxy.port}/{database}"
        run = subprocess.run([sys.executable, "-m", "tests.connectors.jdbc_task_rerun", url, "postgres", "t_rerun",
                              str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    finally:
        proxy.close()
    assert run.returncode == 0, run.stderr[-3000:]
    assert proxy.lost.is_set(), "the proxy never cut a staging write's COMMIT answer: nothing was tried"
    conn = JdbcUrl.parse(f"jdbc:postgresql://127.0.0.1:5432/{database}").connect("postgres", autocommit=True)
    try:
        cursor = conn.cursor()
        cursor.execute("SELECT count(*), count(DISTINCT id) FROM t_rerun")
        total, distinct = cursor.fetchone()
    finally:
        conn.close()
    assert (distinct, total) == (100, 100), f"{total} rows for 100 ids: a retried task's staged rows went in twice"
    assert json.loads(run.stdout.strip().splitlines()[-1])["rows"] == 100
