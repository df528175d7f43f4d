"""Sinks of one target whose save modes check the target (ERROR_WHEN_DATA_EXISTS,
ERROR_WHEN_SCHEMA_NOT_EXIST) or skip making it (IGNORE) beside a sink with other save modes.

A target's save modes are decided once per job run, by whichever sink's pipeline prepares it first
(plugin/save_mode_door.py); the other sinks carry that decision out. So with APPEND_DATA on one sink
and ERROR_WHEN_DATA_EXISTS on another, whether the job refuses rows already in the target depended on
which pipeline came first, and with LocalFile paths one inside the other, either path's check saw
the other sink's rows or not, as the pipelines came (outside review of the G fixes, F6; a partitioned
enclosing sink writes into inner directories, and links: review of stop 46, F2, F3). Refused when
planned now, naming both sinks; equal save modes stay planned.
"""

from __future__ import annotations

import os

import pytest

from seatide.config.job import ConfigError
from tests.plan.test_review8_shared_targets import JDBC, _file, _job


@pytest.mark.parametrize("first,second", [
    ('data_save_mode = "APPEND_DATA"', 'data_save_mode = "ERROR_WHEN_DATA_EXISTS"'),
    ('schema_save_mode = "CREATE_SCHEMA_WHEN_NOT_EXIST"', 'schema_save_mode = "ERROR_WHEN_SCHEMA_NOT_EXIST"'),
    ('schema_save_mode = "IGNORE"', 'schema_save_mode = "CREATE_SCHEMA_WHEN_NOT_EXIST"'),
], ids=["error-when-data-exists", "error-when-schema-not-exist", "ignore"])
def test_a_checking_save_mode_beside_another_on_one_table_is_refused_naming_both(first, second):
    with pytest.raises(ConfigError) as refused:
        _job(f'Jdbc {{ plugin_input = "a", {JDBC}, {first} }}', f'Jdbc {{ plugin_input = "b", {JDBC}, {second} }}')
    message = str(refused.value)
    assert "sink[0] Jdbc" in message and "sink[1] Jdbc" in message, message
    assert "different save modes" in message and "which pipeline prepares it first" in message, message


def test_a_checking_save_mode_on_every_sink_of_a_table_is_planned():
    check = 'data_save_mode = "ERROR_WHEN_DATA_EXISTS", schema_save_mode = "ERROR_WHEN_SCHEMA_NOT_EXIST"'
    _job(f'Jdbc {{ plugin_input = "a", {JDBC}, {check} }}', f'Jdbc {{ plugin_input = "b", {JDBC}, {check} }}')


def test_one_directory_with_error_when_data_exists_beside_append_data_is_refused(tmp_path):
    out = str(tmp_path / "out")
    with pytest.raises(ConfigError, match="different save modes"):
        _job(_file("a", out), _file("b", out, ', data_save_mode = "ERROR_WHEN_DATA_EXISTS"'))


@pytest.mark.parametrize("mode", ['data_save_mode = "ERROR_WHEN_DATA_EXISTS"',
                                  'schema_save_mode = "ERROR_WHEN_SCHEMA_NOT_EXIST"'])
def test_an_enclosing_path_that_checks_beside_a_sink_writing_inside_it_is_refused(tmp_path, mode):
    out = tmp_path / "out"
    for sinks in ((_file("a", str(out), f", {mode}"), _file("b", str(out / "b"))),
                  (_file("a", str(out / "b")), _file("b", str(out), f", {mode}"))):
        with pytest.raises(ConfigError) as refused:
            _job(*sinks)
        message = str(refused.value)
        assert f"path {out}" in message and f"path {out / 'b'}" in message and "which pipeline" in message, message


@pytest.mark.parametrize("mode", ['data_save_mode = "ERROR_WHEN_DATA_EXISTS"',
                                  'schema_save_mode = "ERROR_WHEN_SCHEMA_NOT_EXIST"'])
def test_an_inner_path_that_checks_inside_a_partitioned_enclosing_sink_is_refused(tmp_path, mode):
    # the enclosing sink writes its rows into out/id=<v>/ (partition_dir_expression's default): whether
    # out/id=1's check finds files there depends on which pipeline came first (outside review of stop 46, F2)
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="which pipeline comes first"):
        _job(_file("a", str(out), ', partition_by = ["id"]'), _file("b", str(out / "id=1"), f", {mode}"))


def test_an_enclosing_path_that_checks_through_a_link_is_refused(tmp_path):
    # the pair overlaps through the link (F3): a check on either side is timing
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "link")
    with pytest.raises(ConfigError, match="which pipeline comes first"):
        _job(_file("a", str(tmp_path / "link"), ', data_save_mode = "ERROR_WHEN_DATA_EXISTS"'),
             _file("b", str(real / "b")))


@pytest.mark.parametrize("mode", ['data_save_mode = "ERROR_WHEN_DATA_EXISTS"',
                                  'schema_save_mode = "ERROR_WHEN_SCHEMA_NOT_EXIST"'])
def test_an_inner_path_that_checks_beside_an_unpartitioned_enclosing_path_is_planned(tmp_path, mode):
    # an enclosing sink without partition_by writes its files into its own directory only, never into
    # out/rejects: the inner check finds the same whichever pipeline comes first (review of stop 46's keys, 7)
    out = tmp_path / "out"
    _job(_file("a", str(out)), _file("b", str(out / "rejects"), f", {mode}"))
