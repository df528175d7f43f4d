"""Review of 86de63b / b5aba34 (review 8b F7, F9): Iceberg hadoop and Paimon tables are now keyed by
the warehouse's real path, so at batch time a LocalFile DROP_DATA of the warehouse overlaps them and
one warehouse through a symlink is one table. The planner (plan/shared_targets._overlap) compares
only LocalFile paths and equal option sets: such jobs are planned, and at batch time the DROP_DATA is
carried out or refused over the other pipeline's committed rows as the pipelines come (store/
kept_output.py) - whether the job succeeds is timing (promise 2: refused when planned)."""

from __future__ import annotations

import os

import pytest

from seatide.config.job import ConfigError
from tests.plan.test_review8_shared_targets import _file, _job


def _iceberg(name: str, warehouse: str, extra: str = "") -> str:
    return (f'Iceberg {{ plugin_input = "{name}", catalog_name = "seatunnel", namespace = "ns", table = "orders", '
            f'iceberg.catalog.config = {{ type = "hadoop", warehouse = "file://{warehouse}" }}{extra} }}')


def _paimon(name: str, warehouse: str, extra: str = "") -> str:
    return f'Paimon {{ plugin_input = "{name}", warehouse = "{warehouse}", database = "db", table = "orders"{extra} }}'


@pytest.mark.parametrize("table", [_iceberg, _paimon], ids=["iceberg", "paimon"])
def test_a_file_drop_data_of_the_warehouse_beside_a_table_in_it_is_refused_when_planned(tmp_path, table):
    with pytest.raises(ConfigError):
        _job(_file("a", str(tmp_path / "wh"), ', data_save_mode = "DROP_DATA"'), table("b", str(tmp_path / "wh")))


@pytest.mark.parametrize("table", [_iceberg, _paimon], ids=["iceberg", "paimon"])
def test_one_table_through_a_link_and_directly_with_drop_data_and_append_is_refused_when_planned(tmp_path, table):
    (tmp_path / "wh").mkdir()
    os.symlink(tmp_path / "wh", tmp_path / "link")
    with pytest.raises(ConfigError):
        _job(table("a", str(tmp_path / "wh"), ', data_save_mode = "DROP_DATA"'), table("b", str(tmp_path / "link")))
