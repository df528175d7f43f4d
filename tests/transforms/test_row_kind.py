"""FilterRowKind and RowKindExtractor: row kinds at run time and at validation."""

from __future__ import annotations

import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.plugin.rowkind import ROW_KIND_COLUMN, RowKind
from seatide.transforms.fields import TransformInputError
from tests.transforms.conftest import frame, job_text, rows_of, transform_from

I, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE
ALL = frozenset(RowKind)


@pytest.fixture
def changes(spark):
    return frame(spark, [(1, I), (2, UB), (3, UA), (4, D)], "id int")


def test_exclude_kinds_drops_them(changes, ctx):
    transform = transform_from('FilterRowKind { exclude_kinds = ["INSERT", "-U"] }')
    assert rows_of(transform.apply(changes, ctx)) == [(3, UA), (4, D)]
    assert transform.row_kinds(ALL) == frozenset({UA, D})


def test_include_kinds_keeps_only_them(changes, ctx):
    transform = transform_from("FilterRowKind { include_kinds = [INSERT, UPDATE_AFTER] }")
    assert rows_of(transform.apply(changes, ctx)) == [(1, I), (3, UA)]
    assert transform.row_kinds(frozenset({I, D})) == frozenset({I})


def test_validation_sees_the_narrowed_kinds():
    cdc = job_text("FilterRowKind { include_kinds = [INSERT] }", kinds="INSERT, DELETE", accepts="INSERT")
    load_job_text(cdc)
    kept = job_text("FilterRowKind { exclude_kinds = [UPDATE_BEFORE] }", kinds="INSERT, DELETE")
    with pytest.raises(ConfigError, match="cannot apply DELETE"):
        load_job_text(kept)


def test_extractor_short_form_makes_every_row_an_insert(changes, ctx):
    transform = transform_from("RowKindExtractor {}")
    out = transform.apply(changes, ctx)
    assert out.columns == ["id", "row_kind", ROW_KIND_COLUMN]
    assert rows_of(out) == [(1, "+I", I), (2, "-U", I), (3, "+U", I), (4, "-D", I)]
    assert transform.row_kinds(ALL) == frozenset({I})


def test_extractor_full_form_and_custom_name(changes, ctx):
    out = transform_from('RowKindExtractor { custom_field_name = op, transform_type = full }').apply(changes, ctx)
    assert rows_of(out) == [(1, "INSERT", I), (2, "UPDATE_BEFORE", I), (3, "UPDATE_AFTER", I), (4, "DELETE", I)]


def test_extractor_lets_an_insert_only_sink_take_a_change_stream():
    load_job_text(job_text("RowKindExtractor {}", kinds="INSERT, UPDATE_BEFORE, DELETE", accepts="INSERT"))


def test_extractor_refuses_an_existing_field(changes, ctx):
    with pytest.raises(TransformInputError, match="already has a field 'id'"):
        transform_from("RowKindExtractor { custom_field_name = id }").apply(changes, ctx)


def test_row_kind_transforms_on_a_stream(stream):
    records = [{"id": 1, "kind": 0}, {"id": 2, "kind": 3}]
    rows = stream.run(records, "id int", transform_from("FilterRowKind { include_kinds = [DELETE] }"))
    assert rows == [(2, D)]


def test_extractor_on_a_stream(stream):
    rows = stream.run([{"id": 5, "kind": 1}], "id int", transform_from("RowKindExtractor {}"))
    assert rows == [(5, "-U", I)] and stream.columns == ["id", "row_kind", ROW_KIND_COLUMN]


@pytest.mark.parametrize("block, option, message", [
    ("FilterRowKind { }", "exclude_kinds", "set exactly one of include_kinds and exclude_kinds (neither is set)"),
    ("FilterRowKind { include_kinds = [INSERT], exclude_kinds = [DELETE] }", "include_kinds", "both are set"),
    ("FilterRowKind { include_kinds = [UPSERT] }", "include_kinds", "unknown row kind 'UPSERT'"),
    ("FilterRowKind { exclude_kinds = [] }", "exclude_kinds", "exclude_kinds is empty"),
    ("RowKindExtractor { transform_type = LONG }", "transform_type", "must be one of SHORT, FULL"),
    ("RowKindExtractor { custom_field_name = __row_kind }", "custom_field_name", "other than '__row_kind'"),
])
def test_bad_options_name_plugin_and_option(block, option, message):
    with pytest.raises(ConfigError) as err:
        load_job_text(job_text(block))
    assert err.value.plugin == f"transform[0] {block.split()[0]}" and err.value.option == option
    assert message in str(err.value)
