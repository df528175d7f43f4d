"""Outside review 2 of 6f9cbe3 (promises 3, 4). A writer on another host (here a real process in a UTS
namespace of its own, hostname ``other-host``) holds the table's lock and is SIGKILLed: the kernel lets
its lock go, its record in ``.<t>.seatide-holders/`` stays for ever (only a dead holder of the
waiter's own host is removed). Every later waiter's refusal names it as a holder and says "if a holder
named here is stuck, end its job": the user hunts a process that does not exist."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest

from seatide.connectors.paimon import table_lock
from seatide.connectors.paimon.table_lock import TableLock, TableLockWait

CHILD = """
import sys
from seatide.connectors.paimon.table_lock import TableLock
hold = TableLock(sys.argv[1], False, "a writer of db.t on other-host")
print("held", flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare")
def test_a_killed_holder_of_another_host_is_not_named_for_ever(tmp_path, monkeypatch):
    table = tmp_path / "warehouse" / "db.db" / "t"
    table.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(["unshare", "--uts", "sh", "-c", 'hostname other-host && exec "$0" -c "$1" "$2"',
                              sys.executable, CHILD, str(table)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=env)
    assert child.stdout.readline().strip() == "held"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    live = TableLock(str(table), False, "a writer of db.t (live, stuck)")      # a real holder, this process
    monkeypatch.setattr(table_lock, "WAIT_S", 0.3)
    try:
        with pytest.raises(TableLockWait) as waited:
            TableLock(str(table), True, "RECREATE_SCHEMA of db.t")
    finally:
        live.release()
    print(waited.value)
    assert "other-host" not in str(waited.value), waited.value
