"""Outside review of 7d56489..HEAD: configs whose outcome depends on which pipeline comes first that
plan/shared_targets.py still plans (promise 4)."""

from __future__ import annotations

import os

import pytest

from seatide.config.job import ConfigError
from tests.plan.test_review8_shared_targets import _file, _job


def test_an_inner_path_that_checks_inside_a_partitioned_enclosing_sink_is_refused(tmp_path):
    # the enclosing sink writes its rows into out/id=<v>/ (partition_dir_expression's default):
    # whether out/id=1's ERROR_WHEN_DATA_EXISTS finds files there depends on which pipeline came first
    out = tmp_path / "out"
    with pytest.raises(ConfigError):
        _job(_file("a", str(out), ', partition_by = ["id"]'),
             _file("b", str(out / "id=1"), ', data_save_mode = "ERROR_WHEN_DATA_EXISTS"'))


def test_an_enclosing_path_that_checks_through_a_link_is_refused(tmp_path):
    # overlaps() follows the link (the destroy branch refuses this pair), _encloses() compares spellings
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "link")
    with pytest.raises(ConfigError):
        _job(_file("a", str(tmp_path / "link"), ', data_save_mode = "ERROR_WHEN_DATA_EXISTS"'),
             _file("b", str(real / "b")))


def test_control_the_same_link_pair_with_drop_data_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "link")
    with pytest.raises(ConfigError, match="overlap"):
        _job(_file("a", str(tmp_path / "link"), ', data_save_mode = "DROP_DATA"'), _file("b", str(real / "b")))
