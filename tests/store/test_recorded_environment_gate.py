"""Revision 0021 keeps a SeaTide from before recorded environments off a store that may hold them (outside review
M1): that version knows no ``$env`` mark and would fill a marked job's ``${NAME}`` from its own process's
environment. The older version is simulated as it is: this package's code, with its revisions cut back to the
last one it shipped (0020) and that head, opening the store in a process of its own as every driver, worker and
coordinator does when it starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from sqlalchemy import select, text

from seatide import intents
from seatide.store import schema as s
from seatide.store.db import open_store

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BEFORE = "0020"      # the last revision of a SeaTide that did not record environments
JOB = """
env { job.mode = BATCH, job.name = ${SEATIDE_GATE_NAME} }
source { FakeSource { row.num = 1, schema = { fields { id = bigint } } } }
sink { Console {} }
"""
# A SeaTide that knows revisions up to BEFORE only, opening the store.
OLDER = """
import shutil, sys
from seatide.store import migrations
url, scripts, before = sys.argv[1:]
shutil.copytree(migrations.SCRIPTS, scripts, ignore=lambda _dir, names: [
    n for n in names if n == "__pycache__" or (n[:4].isdigit() and n[:4] > before)])
migrations.SCRIPTS, migrations.HEAD = scripts, before
from seatide.store.db import StoreUnavailable, open_store
try:
    open_store(url).dispose()
except StoreUnavailable as exc:
    print("REFUSED:", exc)
    sys.exit(3)
print("OPENED")
"""


def open_as_older(url: str, tmp_path) -> subprocess.CompletedProcess:
    scripts = tmp_path / f"older-{len(list(tmp_path.glob('older-*')))}"
    return subprocess.run([sys.executable, "-c", OLDER, url, str(scripts), BEFORE], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_a_seatide_from_before_recorded_environments_refuses_a_store_with_a_marked_job(store_url, tmp_path):
    store = open_store(store_url)
    try:
        # The store as the older version left it: its revision; that version opens it (the simulation is sound).
        with store.write() as conn:
            conn.execute(text(f"UPDATE alembic_version SET version_num = '{BEFORE}'"))
        older = open_as_older(store_url, tmp_path)
        assert (older.returncode, older.stdout.strip()) == (0, "OPENED"), older.stderr[-2000:]
    finally:
        store.dispose()

    store = open_store(store_url)      # this version: the gate's revision, then a job with its environment marked
    try:
        intents.submit(store, str(tmp_path), text=JOB, job_id="marked", actor="test",
                       environment={"SEATIDE_GATE_NAME": "as-submitted"})
        with store.read() as conn:
            variables = json.loads(conn.execute(select(s.jobs.c.variables)).scalar())
        assert variables == {"$env": "1", "$env.SEATIDE_GATE_NAME": "as-submitted"}
    finally:
        store.dispose()

    older = open_as_older(store_url, tmp_path)
    assert older.returncode == 3, (older.stdout, older.stderr[-2000:])
    assert f"newer than this SeaTide (head {BEFORE}); upgrade SeaTide" in older.stdout, older.stdout
    assert "Traceback" not in older.stdout + older.stderr
