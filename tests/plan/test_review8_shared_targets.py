"""Outside review 8, H: plan/shared_targets.refuse_mixed_save_modes.

1. LocalFile paths one inside the other (``out`` with DROP_DATA, ``out/b`` with APPEND_DATA) were
   planned: two targets to the plan, and at run time the job ran clean or was refused by the door
   depending on which pipeline prepared first. Refused when planned now, naming both sinks and both
   paths; and every pair of sinks is compared, not each against the first of its target.
2. Two different destructive save modes on one target (DROP_DATA and RECREATE_SCHEMA, or two
   custom_sql): the door takes one decision, so only the first preparer's step ran, silently.
   Refused when planned, naming both sinks and the fix.
"""

from __future__ import annotations

import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text

SOURCE = 'FakeSource {{ plugin_output = "{}", row.num = 3, schema = {{ fields {{ id = "bigint" }} }} }}'
JDBC = 'url = "jdbc:postgresql://127.0.0.1:5432/test", user = "u", password = "p", table = "orders"'


def _job(*sinks: str):
    """A job whose sinks read sources a, b, c (as many as there are sinks)."""
    sources = "\n".join(SOURCE.format(name) for name in "abc"[:len(sinks)])
    return load_job_text('env { job.mode = "BATCH" }\nsource {\n' + sources + "\n}\nsink {\n" + "\n".join(sinks) + "\n}\n")


def _file(name: str, path: str, extra: str = "") -> str:
    return f'LocalFile {{ plugin_input = "{name}", path = "{path}", file_format_type = "json"{extra} }}'


def test_a_dropping_path_around_another_sinks_appended_path_is_refused_naming_both(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ConfigError) as refused:
        _job(_file("a", str(out), ', data_save_mode = "DROP_DATA"'), _file("b", str(out / "b")))
    message = str(refused.value)
    assert "sink[0] LocalFile" in message and "sink[1] LocalFile" in message, message
    assert f"path {out}" in message and f"path {out / 'b'}" in message and "overlap" in message, message
    assert "write paths apart" in message and "APPEND_DATA" in message, message


def test_overlapping_paths_are_refused_in_either_order_and_when_both_drop(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="overlap"):
        _job(_file("a", str(out / "b")), _file("b", str(out) + "/", ', data_save_mode = "DROP_DATA"'))
    with pytest.raises(ConfigError, match="overlap"):
        _job(_file("a", str(out / "b"), ', data_save_mode = "DROP_DATA"'),
             _file("b", str(out), ', data_save_mode = "DROP_DATA"'))


def test_paths_apart_and_overlapping_paths_that_keep_data_are_planned(tmp_path):
    _job(_file("a", str(tmp_path / "out"), ', data_save_mode = "DROP_DATA"'), _file("b", str(tmp_path / "outer")))
    _job(_file("a", str(tmp_path / "out")), _file("b", str(tmp_path / "out" / "b")))


def test_every_pair_is_compared_not_each_sink_against_the_first_of_its_target(tmp_path):
    # sink 2 (out/b) lies apart from the first sink (out/a): only the pair (1, 2) overlaps
    out = tmp_path / "out"
    with pytest.raises(ConfigError) as refused:
        _job(_file("a", str(out / "a")), _file("b", str(out)),
             _file("c", str(out / "b"), ', data_save_mode = "DROP_DATA"'))
    assert "sink[1] LocalFile" in str(refused.value) and "sink[2] LocalFile" in str(refused.value)


@pytest.mark.parametrize("second", ['schema_save_mode = "RECREATE_SCHEMA"',
                                    'data_save_mode = "CUSTOM_PROCESSING", custom_sql = "DELETE FROM orders WHERE id < 0"'],
                         ids=["recreate-schema", "custom-processing"])
def test_two_different_destructive_save_modes_on_one_table_are_refused_naming_both(second):
    with pytest.raises(ConfigError) as refused:
        _job(f'Jdbc {{ plugin_input = "a", {JDBC}, data_save_mode = "DROP_DATA" }}',
             f'Jdbc {{ plugin_input = "b", {JDBC}, {second} }}')
    message = str(refused.value)
    assert "sink[0] Jdbc" in message and "sink[1] Jdbc" in message, message
    assert "different destructive save modes" in message and "only one of the two would run" in message, message
    assert "same data_save_mode, schema_save_mode and custom_sql" in message, message


def test_two_custom_sqls_on_one_table_are_refused_and_one_custom_sql_twice_is_planned():
    custom = 'data_save_mode = "CUSTOM_PROCESSING", custom_sql = "{}"'
    with pytest.raises(ConfigError, match="different destructive save modes"):
        _job(f'Jdbc {{ plugin_input = "a", {JDBC}, {custom.format("DELETE FROM orders WHERE id < 0")} }}',
             f'Jdbc {{ plugin_input = "b", {JDBC}, {custom.format("DELETE FROM orders WHERE id > 9")} }}')
    _job(f'Jdbc {{ plugin_input = "a", {JDBC}, {custom.format("DELETE FROM orders")} }}',
         f'Jdbc {{ plugin_input = "b", {JDBC}, {custom.format("DELETE FROM orders")} }}')


def test_one_destructive_save_mode_on_every_sink_of_a_table_is_planned():
    drop = 'data_save_mode = "DROP_DATA"'
    _job(f'Jdbc {{ plugin_input = "a", {JDBC}, {drop} }}', f'Jdbc {{ plugin_input = "b", {JDBC}, {drop} }}',
         f'Jdbc {{ plugin_input = "c", {JDBC}, {drop} }}')
