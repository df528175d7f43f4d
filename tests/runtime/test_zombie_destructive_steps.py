"""A replaced (zombie) driver destroys nothing of its replacement's (issue 21, finding 3).

Deleting is a write like any other: the LocalFile sink's staging cleanup touches only the
attempt's own files, and its save modes (DROP_DATA, RECREATE_SCHEMA) are decided once per
run, fenced by the attempt, and remove only the files present when decided. Real store
(both kinds), real Spark and LocalFile writer; the zombie is a thread held at a failpoint
while the test replaces its attempt, as the leader does when it declares an attempt lost.
"""

from __future__ import annotations

import threading

from seatide import failpoints
from seatide.connectors.file.sink import LocalFileSink
from seatide.plugin.options import read_options
from seatide.runtime.commit_log import SinkCommitLog
from seatide.runtime.reporter import AttemptReporter
from seatide.store.db import AttemptFenced
from tests.runtime.test_sink_decision import (SINK, _frame, _published_ids, attempt_run, new_attempt,  # noqa: F401
                                              store, submit, wait_until)


def _sink(out: str, **options) -> LocalFileSink:
    return LocalFileSink(read_options({"path": out, "file_format_type": "csv", **options}, LocalFileSink.options))


def _in_thread(target) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def run():
        try:
            outcome["result"] = target()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def _write(spark, sink, log, reporter, attempt_id: int):
    return attempt_run(sink, log, reporter, attempt_id).write(_frame(spark), 0)


def test_a_zombies_staging_never_removes_its_replacements_staged_files(spark, store, tmp_path, monkeypatch):
    """The replacement has staged the batch and is about to decide; the zombie, still running,
    stages the same batch: it may clear only its own staging, or the replacement's decision
    would list files that are gone (or none: an empty batch, decided and committed)."""
    submit(store, tmp_path)
    out, gate = str(tmp_path / "out"), tmp_path / "gate"
    sink, log = _sink(out), SinkCommitLog(str(tmp_path / "checkpoint" / "sinks" / SINK))
    zombie_id = new_attempt(store, "j1", 1)
    zombie = AttemptReporter(store, "j1", 1, zombie_id)
    replacement_id = new_attempt(store, "j1", 2)
    replacement = AttemptReporter(store, "j1", 1, replacement_id)
    monkeypatch.setitem(failpoints._POINTS, "sink.before_decision", f"gate:0:{gate}")
    monkeypatch.setitem(failpoints._HITS, "sink.before_decision", 0)
    thread, outcome = _in_thread(lambda: _write(spark, sink, log, replacement, replacement_id))
    try:
        wait_until(lambda: failpoints._HITS["sink.before_decision"] == 1, 120, "the replacement's batch staged")
        monkeypatch.delitem(failpoints._POINTS, "sink.before_decision")   # the zombie is not held
        try:
            _write(spark, sink, log, zombie, zombie_id)
            raise AssertionError("the zombie decided")
        except AttemptFenced:
            pass
    finally:
        gate.touch()
        thread.join(120)
    assert "error" not in outcome, outcome
    assert not outcome["result"].replayed and outcome["result"].state["rows"] == 3
    assert _published_ids(out) == [1, 2, 3]


def test_a_zombie_held_before_its_first_batch_never_drops_what_its_replacement_committed(spark, store, tmp_path,
                                                                                      monkeypatch):
    """DROP_DATA runs before a sink's first batch. A zombie held just before it wakes up after
    its replacement has emptied the path and committed batch 0: it must remove nothing."""
    submit(store, tmp_path)
    out, gate = tmp_path / "out", tmp_path / "gate"
    out.mkdir()
    (out / "old.csv").write_text("100\n")          # what DROP_DATA is for
    sink, log = _sink(str(out), data_save_mode="DROP_DATA"), SinkCommitLog(str(tmp_path / "checkpoint" / "sinks" / SINK))
    monkeypatch.setitem(failpoints._POINTS, "sink.save_modes", f"gate:0:{gate}")
    monkeypatch.setitem(failpoints._HITS, "sink.save_modes", 0)
    zombie_id = new_attempt(store, "j1", 1)
    zombie = AttemptReporter(store, "j1", 1, zombie_id)
    thread, outcome = _in_thread(lambda: _write(spark, sink, log, zombie, zombie_id))
    try:
        wait_until(lambda: failpoints._HITS["sink.save_modes"] == 1, 120, "the zombie at its save modes")
        monkeypatch.delitem(failpoints._POINTS, "sink.save_modes")
        replacement_id = new_attempt(store, "j1", 2)
        result = _write(spark, sink, log, AttemptReporter(store, "j1", 1, replacement_id), replacement_id)
        assert not result.replayed and _published_ids(str(out)) == [1, 2, 3]
    finally:
        gate.touch()
        thread.join(120)
    assert isinstance(outcome.get("error"), AttemptFenced), outcome
    assert _published_ids(str(out)) == [1, 2, 3], "the zombie's save mode removed the committed batch"
