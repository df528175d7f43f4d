"""A hand-edited or corrupt ``seatide.json`` is a refusal naming the file and what is wrong with it,
never a traceback (store/checkpoint_metadata.py): ``seatide resume`` reads it in inspect_checkpoint
and in decided_batches."""

from __future__ import annotations

import json
import os

import pytest

from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan
from seatide.store.decided_batches import Decided, lost_lineage
from seatide.store.restore import inspect_checkpoint
from tests.plan.test_source_identity import JOB


@pytest.mark.parametrize("content, what", [
    ('{"fingerprint": ["x"], "lineage": "l"}', "fingerprint is a list, not a string"),
    ('[1, {"fingerprint": "x"}]', "not a JSON object"),
    ('"just text"', "not a JSON object"),
    ('{"fingerprint": ', "unreadable"),
    # review 5, F4: _prepare_dir read meta["lineage"] (a KeyError after every retry) and meta["origin"]
    ('{"fingerprint": "x"}', "holds no lineage"),
    ('{"fingerprint": "x", "lineage": "l", "origin": 3}', "origin is a number, not a string"),
])
def test_a_corrupt_metadata_file_is_a_refusal_naming_it(tmp_path, content, what):
    directory = str(tmp_path / "1")
    os.makedirs(directory)
    with open(os.path.join(directory, "seatide.json"), "w") as handle:
        handle.write(content)
    pipeline = build_plan(load_job_text(JOB)).pipelines[0]
    problem = inspect_checkpoint(directory, pipeline.fits, True)
    assert problem is not None and os.path.join(directory, "seatide.json") in problem and what in problem
    lost = lost_lineage(directory, Decided(batch=3, checkpointed=3, lineage="l", micro_batch=False))
    assert lost is not None and os.path.join(directory, "seatide.json") in lost and what in lost


def test_a_well_formed_file_still_restores(tmp_path):
    pipeline = build_plan(load_job_text(JOB)).pipelines[0]
    directory = tmp_path / "1"
    os.makedirs(directory / "spark" / "offsets")
    (directory / "seatide.json").write_text(json.dumps({"fingerprint": pipeline.fingerprint(), "lineage": "l"}))
    assert inspect_checkpoint(str(directory), pipeline.fits, True) is None
