"""Outside review 8b, F9 when planning: one directory spelled through a symlink and directly is one
target (``plan/shared_targets.py``), as the door's key makes it: the same save modes on both are one
decision and planned; save modes that differ are refused as on one target, not as paths "one inside
the other"."""

from __future__ import annotations

import os

import pytest

from seatide.config.job import ConfigError
from tests.plan.test_review8_shared_targets import _file, _job

DROP = ', data_save_mode = "DROP_DATA"'


def _linked(tmp_path):
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    return tmp_path / "real" / "out", tmp_path / "link" / "out"


def test_one_directory_through_a_link_and_directly_with_one_save_mode_is_planned(tmp_path):
    real, link = _linked(tmp_path)
    _job(_file("a", str(real), DROP), _file("b", str(link), DROP))


def test_one_directory_through_a_link_with_a_kept_and_a_dropped_sink_is_refused_as_one_target(tmp_path):
    real, link = _linked(tmp_path)
    with pytest.raises(ConfigError) as refused:
        _job(_file("a", str(real)), _file("b", str(link), DROP))
    assert "write the same target" in str(refused.value), str(refused.value)
