"""Review of 4b75f28 / 7f867d6 (F6, F2): a checking save mode on a LocalFile path inside another's is
refused whichever of the two checks. An enclosing sink without partition_by writes its files into its
own directory only, never into the inner path: the inner sink's ERROR_WHEN_DATA_EXISTS (or
ERROR_WHEN_SCHEMA_NOT_EXIST) finds the same thing whichever pipeline comes first. The refusal's
reason ("whether they find sink[0]'s files there depends on which pipeline comes first") is false,
and a valid SeaTunnel config is refused when planned (promise 2)."""

from __future__ import annotations

import pytest

from tests.plan.test_review8_shared_targets import _file, _job


@pytest.mark.parametrize("mode", ['data_save_mode = "ERROR_WHEN_DATA_EXISTS"',
                                  'schema_save_mode = "ERROR_WHEN_SCHEMA_NOT_EXIST"'])
def test_an_inner_path_that_checks_beside_an_unpartitioned_enclosing_path_is_planned(tmp_path, mode):
    out = tmp_path / "out"
    _job(_file("a", str(out)), _file("b", str(out / "rejects"), f", {mode}"))
