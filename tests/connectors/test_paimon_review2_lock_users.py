"""Outside review 2 of 5ad2a7f (promise 3): a refusal says exactly what the user must do.

A warehouse shared by two OS users (the table group- or world-writable, as Paimon jobs of two
service accounts share one): the first writer made ``.<t>.seatide-lock`` 0644 under its umask, so
the second cannot open it ``a+`` (flock needs only a read descriptor). ``_open`` calls every OSError
a filesystem that refuses flock, and the job fails for good telling the user to move the warehouse
to a local disk or fix NFS mount options: wrong cause, wrong way on. A real second process as
``nobody`` (setpriv)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from seatide.connectors.paimon.table_lock import TableLock

CHILD = """
import sys
from seatide.connectors.paimon.table_lock import TableLock
try:
    TableLock(sys.argv[1], False, "a writer of db.t").release()
    print("TOOK")
except Exception as exc:
    print(type(exc).__name__ + ": " + str(exc))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a second user's process")
def test_a_lock_file_another_user_made_is_not_called_a_filesystem_without_flock(tmp_path):
    database = tmp_path / "warehouse" / "db.db"
    table = database / "t"
    table.mkdir(parents=True)
    for d in (tmp_path, tmp_path / "warehouse", database, table):
        os.chmod(d, 0o777)                          # a warehouse both users write
    old = os.umask(0o022)
    try:
        TableLock(str(table), False, "the first user's writer").release()
    finally:
        os.umask(old)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", CHILD,
                          str(table)], capture_output=True, text=True, env=env, timeout=60)
    said = out.stdout.strip() or out.stderr.strip()
    print(said)
    assert said == "TOOK" or ("permission" in said.lower() and "local disk" not in said), said
