"""A pipeline whose source is refused at its first offsets (Postgres-CDC on another consumer's slot.name:
stream.py initialOffset, permanent) fails before the next pipeline's query starts, and a pipeline not started
yet whose sink would remove data (DROP_DATA) is refused with it: nothing removed for a job that fails
(outside review rev3, A2: the start loop never looked whether a started pipeline had failed)."""

from __future__ import annotations

import pytest

from tests.e2e.harness import InProcessCluster, dropped_and_guarded, fake_sources_job

pytestmark = pytest.mark.spark


class _RefusedAtFirstRead:
    """A query whose source refused at its first read, before any batch: what Postgres-CDC's initialOffset does on a
    slot.name another consumer holds (stream.py initialOffset -> slot.start_afresh -> slot._refuse, permanent)."""

    isActive = False
    recentProgress: list = []
    lastProgress = None
    status = {"message": "Stopped", "isTriggerActive": False}
    runId = "refused-at-first-read"

    def exception(self):
        from seatide.plugin.base import PERMANENT_MARK

        return RuntimeError(PERMANENT_MARK + "Postgres-CDC cannot start this job afresh: replication slot 'x' "
                            "(slot.name) is another consumer's (simulated)")

    def stop(self) -> None:
        pass


@pytest.mark.parametrize("refused_first", [True, False], ids=["refused-listed-first", "refused-listed-second"])
def test_a_pipeline_refused_at_its_first_read_keeps_the_pipelines_after_it_from_dropping_data(spark, tmp_path,
                                                                                            monkeypatch, refused_first):
    """pipeline_start.start_pipelines starts every pipeline in turn and never looks whether one started before
    has already failed: the DROP_DATA pipeline after it starts and runs its first batch, for a job that fails
    for good. (The docstring only owns up to the other order.)"""
    from seatide.runtime.pipeline_run import PipelineRun

    real, started = PipelineRun._start_query, []

    def start_query(self, sinks):
        names = [s.name for s in self.pipeline.sinks]
        started.append(names)
        if "Console" in names:
            self.query = _RefusedAtFirstRead()
            return
        real(self, sinks)

    monkeypatch.setattr(PipelineRun, "_start_query", start_query)
    dropped, _ = dropped_and_guarded(tmp_path)
    # Listed second, the refused pipeline still starts first: the one that would remove data starts last.
    refused, dropping = ("s1", "s2") if refused_first else ("s2", "s1")
    text = fake_sources_job(f"""
  Console {{ plugin_input = "{refused}" }}
  LocalFile {{ plugin_input = "{dropping}", path = "{dropped}", file_format_type = "json", data_save_mode = "DROP_DATA" }}""",
                            pipelines=2, env="checkpoint.interval = 1000")
    run = InProcessCluster(spark, str(tmp_path / "data")).run(text, max_attempts=1)
    assert run.status == "FAILED" and "simulated" in run.error, run.error
    assert started and "Console" in started[0], started       # the refused pipeline started first
    assert (dropped / "kept.json").exists(), f"emptied for a refused job: {sorted(p.name for p in dropped.iterdir())}"
    assert started == [["Console"]], f"pipelines started after one had already been refused: {started}"
