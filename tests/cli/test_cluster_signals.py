"""A SIGTERM or Ctrl-C to ``seatide cluster coordinator|worker`` stops it cleanly: its node row is marked stopped.

uvicorn (0.29 and later) catches SIGTERM and SIGINT while it serves and raises them again, with the handler from
before, once the server has exited: with the default SIGTERM handler the coordinator died right there, before its
``finally`` resigned the lease and marked its row stopped (outside review of envgate, finding 1). Real processes on
a real SQLite store; the row is read from the store after the process has exited.
"""

from __future__ import annotations

import os
import signal
import subprocess

import pytest
from sqlalchemy import select

from seatide.store import schema as s
from seatide.store.db import open_store
from seatide.testing.cluster import SEATIDE, free_port, http, wait_for

# A stop asked for is a clean exit, 0, for SIGTERM (what a supervisor expects) and Ctrl-C alike, from both
# servers: the coordinator's Ctrl-C ended 130 or 0 by a race before (a fresh-clone run, stop 56).
STOP_CODES = {(role, sig): 0 for role in ("coordinator", "worker") for sig in (signal.SIGTERM, signal.SIGINT)}


def _row(store, node_id: str):
    with store.read() as conn:
        return conn.execute(select(s.nodes).where(s.nodes.c.node_id == node_id)).first()


def _serving(url: str) -> bool:
    try:
        return http("GET", url, timeout=2)[0] == 200
    except OSError:
        return False


@pytest.mark.cluster
@pytest.mark.parametrize("role", ["coordinator", "worker"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_marks_the_node_stopped(tmp_path, role, sig):
    url, data_dir, port = f"sqlite:///{tmp_path}/state.db", tmp_path / "data", free_port()
    data_dir.mkdir()
    flags = (["--port", str(port), "--no-plan-warm-up"] if role == "coordinator"
             else ["--slots", "1", "--warm-drivers", "0"])
    log_path = tmp_path / "node.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([*SEATIDE, "cluster", role, "--node-id", "n1", "--store", url,
                                    "--data-dir", str(data_dir), *flags],
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
    store = None
    try:
        def up() -> bool:
            assert process.poll() is None, log_path.read_text()
            if not os.path.exists(tmp_path / "state.db"):
                return False
            if role == "coordinator":
                return _serving(f"http://127.0.0.1:{port}/api/v1/overview")
            return True
        wait_for(up, timeout=120, message=f"the {role} serving")
        store = open_store(url)
        wait_for(lambda: _row(store, "n1") is not None, timeout=60, message=f"the {role} registered")
        assert not _row(store, "n1").stopped
        process.send_signal(sig)
        code = process.wait(timeout=60)
        output = log_path.read_text()
        assert code == STOP_CODES[role, sig], f"exit {code}\n{output}"
        assert "Traceback" not in output, output
        assert _row(store, "n1").stopped, f"the {role}'s row is not marked stopped\n{output}"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
        if store is not None:
            store.dispose()
