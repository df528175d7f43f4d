"""Outside review of the dropped-output check (c33655f), F1: a target two pipelines of the job share.

The door's save-mode record is made once per job and target, by whichever pipeline prepares the
target first, and names that pipeline alone (runtime/sink_runs.attempt_run). store/dropped_output.py
counts a destructive decision only for the pipeline it names, so a fresh start in which pipeline 2
emptied the target pipeline 1 had committed into is not seen by pipeline 1's check.

Pipelines 1 (ids 0..899) and 2 (ids 100000..100899) write one LocalFile path under APPEND_DATA.
Incarnation 1: pipeline 1 commits batch 0 (ids 0-299) and dies; pipeline 2 is held before its first
batch. Both directories are backed up. A fresh start with DROP_DATA: pipeline 2 comes to the door
first (pipeline 1 held before its first batch), removes ids 0-299, and dies before deciding. The
backups are put back and the job resumed: pipeline 1's lineage 1 goes on from batch 1, and ids
0-299 are lost for good. Expected: refused, as for a one-pipeline job.
"""

from __future__ import annotations

import shutil
import threading

import pytest

from seatide import failpoints, intents
from tests.e2e.test_backup_older_than_sinks import refused_resume
from tests.e2e.test_jobs import parquet_ids

pytestmark = pytest.mark.spark

FIELDS = "schema = { fields { id = bigint, name = string, value = double } }"


def _job(out: str, save_mode: str) -> str:
    mode = f', data_save_mode = "{save_mode}"' if save_mode else ""
    return two_pipelines(f'LocalFile {{ plugin_input = "a", path = "{out}", file_format_type = "parquet"{mode} }}',
                         f'LocalFile {{ plugin_input = "b2", path = "{out}", file_format_type = "parquet"{mode} }}')


def two_pipelines(sink_a: str, sink_b: str) -> str:
    """Pipelines 1 (ids 0..899 into ``sink_a``) and 2 (ids 100000..100899 into ``sink_b``), 300 rows a
    micro-batch, no retries."""
    return f"""
env {{ job.mode = BATCH, parallelism = 1, job.retry.interval.seconds = 0, checkpoint.interval = 1000,
      micro-batch.max-rows = 300, job.retry.times = 0 }}
source {{
  FakeSource {{ plugin_output = "a", row.num = 900, split.num = 6, sequence.field = "id", {FIELDS} }}
  FakeSource {{ plugin_output = "b", row.num = 900, split.num = 6, sequence.field = "id", {FIELDS} }}
}}
transform {{
  Sql {{ plugin_input = "b", plugin_output = "b2", query = "select id + 100000 as id, name, value from b" }}
}}
sink {{
  {sink_a}
  {sink_b}
}}
"""


# Far past any story's length under load: the timer only keeps a broken stop from hanging the
# test. At 180 s it opened a held pipeline's gate mid-story in a loaded CI run (load 12-15): the
# held pipeline wrote its rows before the test's cancel, and the story failed on its first run.
NEVER_A_HUNG_TEST_S = 900


def _release_later(path: str, seconds: float = NEVER_A_HUNG_TEST_S) -> None:
    """A gate the driver's stop should release; never a hung test if it does not."""
    timer = threading.Timer(seconds, lambda: open(path, "w").close())
    timer.daemon = True
    timer.start()


@pytest.mark.parametrize("started_over", [True, False], ids=["pipeline-1-started-over", "pipeline-1-in-place"])
def test_a_backup_from_before_another_pipelines_dropping_fresh_start_is_refused(local, tmp_path, monkeypatch,
                                                                               started_over):
    """``started_over``: pipeline 1's directory is lost before the fresh start, which starts it over (its
    rows may be emptied: it writes them again). Otherwise ``--fallback fresh`` resumes both pipelines in
    place (neither has a problem), and pipeline 2's DROP_DATA would empty rows pipeline 1 carries on
    from: refused at the door (store/kept_output.py), nothing destroyed, and there is no put-back to test."""
    out = str(tmp_path / "out")
    points = failpoints._POINTS
    monkeypatch.setitem(points, "driver.after_sink_commit", f"once:raise:{tmp_path / 'crashed'}")
    monkeypatch.setitem(points, "driver.batch_start@2", f"gate:0:{tmp_path / 'release-2'}")
    _release_later(str(tmp_path / "release-2"))
    failed = local.run(_job(out, ""))
    assert failed.status == "FAILED" and parquet_ids(out) == list(range(300)), (failed.status, failed.error)
    pipelines = failed.pipelines()
    assert [p.pipeline_id for p in pipelines] == [1, 2]
    backups = []
    for p in pipelines:
        backups.append((p.checkpoint_dir, str(tmp_path / f"backup-{p.pipeline_id}")))
        shutil.copytree(p.checkpoint_dir, backups[-1][1], symlinks=True)

    if started_over:
        shutil.rmtree(pipelines[0].checkpoint_dir)
    # the fresh start: pipeline 2 prepares the target first and dies before deciding a batch
    monkeypatch.delitem(points, "driver.after_sink_commit")
    monkeypatch.delitem(points, "driver.batch_start@2")
    monkeypatch.setitem(points, "driver.batch_start@1", f"gate:0:{tmp_path / 'release-1'}")
    monkeypatch.setitem(points, "sink.before_decision", "raise")
    _release_later(str(tmp_path / "release-1"))
    intents.resume(local.store, failed.job_id, text=_job(out, "DROP_DATA"), fallback="fresh", actor="test")
    fresh = local.drive(failed.job_id)
    if not started_over:
        assert fresh.status == "FAILED" and "pipeline 1, which is not started over" in (fresh.error or ""), fresh.error
        assert parquet_ids(out) == list(range(300)), "the refused DROP_DATA removed pipeline 1's rows"
        return
    assert fresh.status == "FAILED" and "sink.before_decision" in (fresh.error or ""), fresh.error
    assert parquet_ids(out) == [], "the fresh start's DROP_DATA did not remove lineage 1's rows"
    monkeypatch.delitem(points, "driver.batch_start@1")
    monkeypatch.delitem(points, "sink.before_decision")

    for directory, backup in backups:            # the backups put back
        shutil.rmtree(directory)
        shutil.copytree(backup, directory, symlinks=True)
    message = refused_resume(local, failed.job_id, out)
    assert "pipeline 1" in message and "DROP_DATA" in message, message
    assert "of pipeline 2, which writes the same target" in message and "holds lineage" in message, message


def until_pipeline_finished(store, job_id: str, pipeline_id: int) -> None:
    """Poll the store until ``pipeline_id`` of the job's newest incarnation FINISHED; after
    ``NEVER_A_HUNG_TEST_S`` go on anyway (the story's own assertions then fail, never hang)."""
    import time

    from sqlalchemy import select

    from seatide.store import schema as s

    deadline = time.time() + NEVER_A_HUNG_TEST_S
    while time.time() < deadline:
        with store.read() as conn:
            status = conn.execute(select(s.pipelines.c.status).where(
                (s.pipelines.c.job_id == job_id) & (s.pipelines.c.pipeline_id == pipeline_id))
                .order_by(s.pipelines.c.incarnation.desc())).scalar()
        if str(status).endswith("FINISHED"):
            return
        time.sleep(0.1)


def _cancel_once_finished(pipeline_id: int):
    """A stop_after: cancel the job once ``pipeline_id`` has FINISHED."""
    def stop(store, job_id):
        until_pipeline_finished(store, job_id, pipeline_id)
        intents.stop(store, job_id, actor="test")
    return stop


def test_a_fresh_start_of_one_pipeline_keeps_what_a_finished_pipeline_wrote(local, tmp_path, monkeypatch):
    """F2 (no put-back): pipeline 1 FINISHED (ids 0-899 in the shared path); pipeline 2, held before its
    first batch, is cancelled. A fresh start with DROP_DATA starts pipeline 2 alone (every unfinished
    pipeline), whose door makes the target's first record and removes pipeline 1's files; pipeline 1
    is never run again. Expected: the job ends with both pipelines' rows, or the fresh start is refused
    (by the resume, or at the door by pipeline 2's driver, permanently, naming the shared target)."""
    out = str(tmp_path / "out")
    monkeypatch.setitem(failpoints._POINTS, "driver.batch_start@2", f"gate:0:{tmp_path / 'release-2'}")
    _release_later(str(tmp_path / "release-2"))
    first = local.run(_job(out, ""), stop_after=_cancel_once_finished(1))
    assert parquet_ids(out) == list(range(900)), (first.status, first.error)
    monkeypatch.delitem(failpoints._POINTS, "driver.batch_start@2")
    try:
        intents.resume(local.store, first.job_id, text=_job(out, "DROP_DATA"), fallback="fresh", actor="test")
    except intents.Refusal:
        return                                          # refused: nothing lost
    fresh = local.drive(first.job_id)
    ids = parquet_ids(out)
    if fresh.status == "FAILED" and "is shared" in (fresh.error or ""):
        # refused at the door (store/kept_output.py), before anything was destroyed, once: no retry loop
        assert ids == list(range(900)), f"{len(ids)} rows after the refusal"
        assert "pipeline 1, which FINISHED" in fresh.error and "DROP_DATA" in fresh.error, fresh.error
        assert "as a new job" in fresh.error and "APPEND_DATA" in fresh.error, fresh.error
        return
    assert ids == list(range(900)) + list(range(100000, 100900)), \
        f"{fresh.status}: {len(ids)} rows, ids 0-899 present: {sum(1 for i in ids if i < 100000)}"
