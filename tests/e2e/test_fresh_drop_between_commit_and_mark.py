"""Outside review 8, G: a fresh start's DROP_DATA (Jdbc) between another pipeline's COMMIT and its mark.

Pipelines 1 (ids 0..899) and 2 (ids 100000..100899) write one Jdbc table with DROP_DATA. Incarnation
1: pipeline 2 commits batch 0 and the job fails; pipeline 1, held before its first batch, has
written nothing. Pipeline 2's checkpoint is lost, so ``resume --fallback fresh`` starts pipeline 2
over and resumes pipeline 1 in place (its save modes were decided in incarnation 1: nothing to
destroy). Pipeline 1 commits its batch 0 in the table (rows and its ``seatide_sink_commits`` record
in one transaction) and is held before its commit mark (``sink.after_decision``); then pipeline 2,
started over, prepares the table. store/kept_output.py sees no mark of pipeline 1 naming it.
Expected: pipeline 1's committed rows stay (the DROP_DATA is refused, or nothing of them is taken),
on PostgreSQL and on MariaDB.

Real job in the shared SparkSession on a real SQLite store, real PostgreSQL and MariaDB.
"""

from __future__ import annotations

import os
import shutil

import pytest

from seatide import failpoints, intents
from tests.connectors.jdbc_sink_helpers import query, table_name
from tests.e2e.harness import wait_for
from tests.e2e.test_backup_before_another_pipelines_drop import _release_later, two_pipelines

pytestmark = pytest.mark.spark

SERVERS = {"postgresql": ("jdbc:postgresql://127.0.0.1:5432/test", "postgres"),
           "mariadb": ("jdbc:mariadb://127.0.0.1:3306/test", "root")}


def _job(db, table: str) -> str:
    sink = f'url = "{db[0]}", user = "{db[1]}", table = "{table}", data_save_mode = "DROP_DATA"'
    return two_pipelines(f'Jdbc {{ plugin_input = "a", {sink} }}', f'Jdbc {{ plugin_input = "b2", {sink} }}')


def _ids(db, table: str) -> list[int]:
    return [r[0] for r in query(db, f"SELECT id FROM {table} ORDER BY id")]


def _pipeline_failed(store, job_id: str, pipeline_id: int) -> bool:
    from sqlalchemy import select

    from seatide.store import schema as s
    with store.read() as conn:
        status = conn.execute(select(s.pipelines.c.status).where(
            (s.pipelines.c.job_id == job_id) & (s.pipelines.c.pipeline_id == pipeline_id))
            .order_by(s.pipelines.c.incarnation.desc())).scalar()
    return str(status).endswith(("FAILED", "CANCELED"))


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_a_fresh_drop_data_never_takes_rows_committed_before_their_mark(local, tmp_path, monkeypatch, server):
    db, table = SERVERS[server], table_name()
    points = failpoints._POINTS
    monkeypatch.setitem(points, "driver.after_sink_commit", f"once:raise:{tmp_path / 'crashed'}")
    monkeypatch.setitem(points, "driver.batch_start@1", f"gate:0:{tmp_path / 'release-1'}")
    _release_later(str(tmp_path / "release-1"))
    try:
        failed = local.run(_job(db, table))
        assert failed.status == "FAILED" and _ids(db, table) == list(range(100000, 100300)), failed.error
        (one, two) = failed.pipelines()
        shutil.rmtree(two.checkpoint_dir)        # pipeline 2's checkpoint is lost: the fresh start begins it anew
        for name in ("driver.after_sink_commit", "driver.batch_start@1"):
            monkeypatch.delitem(points, name)

        release_2, release_marks = str(tmp_path / "release-2"), str(tmp_path / "release-marks")
        monkeypatch.setitem(points, "driver.batch_start@2", f"gate:0:{release_2}")
        monkeypatch.setitem(points, "sink.after_decision", f"gate:0:{release_marks}")
        _release_later(release_2)
        _release_later(release_marks)

        def interleave(store, job_id):
            # pipeline 1 committed its batch 0 and is held before its mark: let pipeline 2 prepare
            wait_for(lambda: len([i for i in _ids(db, table) if i < 100000]) == 300, "pipeline 1's batch 0 committed")
            open(release_2, "w").close()
            # pipeline 2's door ran: it emptied the table (pipeline 1's rows gone), or it was refused
            wait_for(lambda: all(i >= 100000 for i in _ids(db, table)) or _pipeline_failed(store, job_id, 2),
                     "pipeline 2 past its door")
            open(release_marks, "w").close()

        intents.resume(local.store, failed.job_id, fallback="fresh", actor="test")
        fresh = local.drive(failed.job_id, stop_after=interleave)
        ids = _ids(db, table)
        kept = [i for i in ids if i < 100000]
        assert kept[:300] == list(range(300)), \
            f"pipeline 1's committed batch 0 was taken by the fresh DROP_DATA: {len(kept)} of its rows left, " \
            f"job {fresh.status}: {fresh.error}"
        if fresh.status == "FINISHED":
            assert ids == list(range(900)) + list(range(100000, 100900)), (len(ids), len(set(ids)))
        else:
            assert "pipeline 1, which is not started over" in (fresh.error or ""), fresh.error
    finally:
        for path in ("release-1", "release-2", "release-marks"):
            if not os.path.exists(tmp_path / path):
                open(tmp_path / path, "w").close()
        try:
            query(db, f"DROP TABLE IF EXISTS {table}")
        except Exception:
            pass
