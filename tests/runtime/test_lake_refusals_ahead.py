"""A lake sink's missing table under a schema save mode that refuses it (ERROR_WHEN_SCHEMA_NOT_EXIST, IGNORE)
refuses the job before another sink's DROP_DATA empties its target (outside review rev3, part A): Paimon and
Iceberg refused it only when the table was made usable, at their first batch (``check_save_modes`` asks ahead)."""

from __future__ import annotations

import pytest

from tests.e2e.harness import InProcessCluster, dropped_and_guarded, fake_sources_job

pytestmark = pytest.mark.spark


def _paimon_missing(tmp_path, mode: str) -> str:
    return (f'Paimon {{ plugin_input = "s1", warehouse = "{tmp_path / "pwh"}", database = "db", table = "missing", '
            f'schema_save_mode = "{mode}" }}')


def _iceberg_missing(tmp_path, modes: str) -> str:
    return (f'Iceberg {{ plugin_input = "s1", namespace = "ns", table = "missing", '
            f'iceberg.catalog.config = {{ type = "hadoop", warehouse = "file://{tmp_path}/iwh" }}, {modes} }}')


CASES = {
    # PaimonTarget.ensure refused a missing table; save_mode_plan returns None for it
    "paimon-error-when-schema-not-exist": lambda t: _paimon_missing(t, "ERROR_WHEN_SCHEMA_NOT_EXIST"),
    "paimon-ignore": lambda t: _paimon_missing(t, "IGNORE"),
    # table_setup.ensure refused IGNORE on a missing table (no save modes pass the door under APPEND_DATA)
    "iceberg-ignore": lambda t: _iceberg_missing(t, 'schema_save_mode = "IGNORE"'),
    "iceberg-error-when-schema-not-exist": lambda t: _iceberg_missing(
        t, 'schema_save_mode = "ERROR_WHEN_SCHEMA_NOT_EXIST"'),
    # save_mode_plan refused it, but Target.check_save_modes skipped a target whose save modes destroy
    "iceberg-drop-data-error-when-schema-not-exist": lambda t: _iceberg_missing(
        t, 'schema_save_mode = "ERROR_WHEN_SCHEMA_NOT_EXIST", data_save_mode = "DROP_DATA"'),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_lake_sinks_missing_table_refuses_before_another_sinks_drop_data(spark, tmp_path, case):
    dropped, _ = dropped_and_guarded(tmp_path)
    text = fake_sources_job(f"""
  LocalFile {{ plugin_input = "s1", path = "{dropped}", file_format_type = "json", data_save_mode = "DROP_DATA" }}
  {CASES[case](tmp_path)}""")
    run = InProcessCluster(spark, str(tmp_path / "data")).run(text, max_attempts=1)
    assert run.status == "FAILED", run.error
    assert "does not exist" in run.error, run.error
    assert (dropped / "kept.json").exists(), f"emptied for a refused job: {sorted(p.name for p in dropped.iterdir())}"
