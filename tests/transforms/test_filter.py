"""Filter: keep or drop fields; the row kind always passes."""

from __future__ import annotations

import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.plugin.rowkind import ROW_KIND_COLUMN, RowKind
from seatide.transforms.fields import TransformInputError
from tests.transforms.conftest import frame, job_text, rows_of, transform_from

I, D = RowKind.INSERT, RowKind.DELETE


@pytest.fixture
def cards(spark):
    return frame(spark, [("Joy Ding", 20, 123, I), ("May Ding", 21, 456, D)], "name string, age int, card int")


def test_include_fields_keeps_them_in_the_order_given(cards, ctx):
    out = transform_from("Filter { include_fields = [card, name] }").apply(cards, ctx)
    assert out.columns == ["card", "name", ROW_KIND_COLUMN]
    assert rows_of(out) == [(123, "Joy Ding", I), (456, "May Ding", D)]


def test_exclude_fields_keeps_the_rest_in_input_order(cards, ctx):
    out = transform_from("Filter { exclude_fields = [age] }").apply(cards, ctx)
    assert out.columns == ["name", "card", ROW_KIND_COLUMN]
    assert rows_of(out) == [("Joy Ding", 123, I), ("May Ding", 456, D)]


def test_legacy_fields_option_means_include(cards, ctx):
    out = transform_from("Filter { fields = [age] }").apply(cards, ctx)
    assert out.columns == ["age", ROW_KIND_COLUMN]


def test_missing_field_names_transform_field_and_available_fields(cards, ctx):
    with pytest.raises(TransformInputError) as err:
        transform_from("Filter { exclude_fields = [age, nope] }").apply(cards, ctx)
    assert str(err.value) == ("Filter: exclude_fields names field 'nope', which the input does not "
                              "have (available fields: name, age, card)")
    assert err.value.option == "exclude_fields"


def test_filter_on_a_stream(stream):
    rows = stream.run([{"a": 1, "b": "x", "kind": 1}], "a int, b string",
                      transform_from("Filter { include_fields = [b] }"))
    assert rows == [("x", RowKind.UPDATE_BEFORE)] and stream.columns == ["b", ROW_KIND_COLUMN]


@pytest.mark.parametrize("block, option, message", [
    ("Filter { }", "exclude_fields", "set exactly one of include_fields and exclude_fields (neither is set)"),
    ("Filter { include_fields = [a], exclude_fields = [b] }", "include_fields", "(both are set)"),
    ("Filter { include_fields = [] }", "include_fields", "include_fields is empty"),
    ("Filter { include_fields = [a, a] }", "include_fields", "lists the output field 'a' more than once"),
    ("Filter { include_fields = 3 }", None, "must be list of strings"),
])
def test_bad_options_name_plugin_and_option(block, option, message):
    with pytest.raises(ConfigError) as err:
        load_job_text(job_text(block))
    assert err.value.plugin == "transform[0] Filter"
    assert option is None or err.value.option == option
    assert message in str(err.value)
