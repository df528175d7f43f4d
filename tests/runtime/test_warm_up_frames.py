"""A warm driver analyses the sample job's DataFrames while idle: through the attempt's own code
(PipelineRun._frames), running nothing, leaving nothing in the session for a job to trip on."""

from __future__ import annotations

import pytest

from seatide.plan.warm_up import sample_job
from seatide.runtime.warm_driver import analyse_frames


@pytest.mark.spark
def test_the_sample_jobs_frames_are_analysed_and_leave_no_view_or_query_behind(spark):
    views_before = {t.name for t in spark.catalog.listTables() if t.isTemporary}
    config, plan = sample_job()
    assert config.env.micro_batch        # the path a checkpointed attempt takes: a streaming source
    analyse_frames(spark, config, plan)
    assert {t.name for t in spark.catalog.listTables() if t.isTemporary} == views_before
    assert spark.streams.active == []    # analysed, never started
