"""A private MariaDB with the binary log on, for change-data-capture tests and benches.

The shared MariaDB on 3306 runs without ``log_bin``, and CDC tests purge binary logs,
which no shared server should suffer. So each test session installs a throw-away data
directory and runs its own ``mariadbd`` on a free port (``seatide.testing.servers``), with
row-based logging of full row images, and stops it at the end even when tests fail.
"""

from __future__ import annotations

import shutil
import tempfile

import pytest

from seatide.testing.servers import (PrivateMariaDB, start_private_mariadb,  # noqa: F401  (benches import them here)
                                     stop_private_mariadb)


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
