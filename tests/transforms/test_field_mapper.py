"""FieldMapper: choose, order and rename fields."""

from __future__ import annotations

import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.plugin.rowkind import ROW_KIND_COLUMN, RowKind
from seatide.transforms.fields import TransformInputError
from tests.transforms.conftest import frame, job_text, rows_of, transform_from

I, UA = RowKind.INSERT, RowKind.UPDATE_AFTER


@pytest.fixture
def people(spark):
    return frame(spark, [(1, "Joy Ding", 20, 123, I), (2, "May Ding", 20, 123, UA)],
                 "id int, name string, age int, card int")


def test_seatunnel_doc_example(people, ctx):
    mapper = transform_from("FieldMapper { field_mapper = { id = id, card = card, name = new_name } }")
    out = mapper.apply(people, ctx)
    assert out.columns == ["id", "card", "new_name", ROW_KIND_COLUMN]
    assert rows_of(out) == [(1, 123, "Joy Ding", I), (2, 123, "May Ding", UA)]


def test_missing_source_field_lists_available_fields(people, ctx):
    with pytest.raises(TransformInputError, match=r"FieldMapper: field_mapper names field 'nme', "
                       r"which the input does not have \(available fields: id, name, age, card\)"):
        transform_from("FieldMapper { field_mapper = { nme = name } }").apply(people, ctx)


def test_field_mapper_on_a_stream(stream):
    rows = stream.run([{"a": 1, "b": "x", "kind": 2}], "a int, b string",
                      transform_from("FieldMapper { field_mapper { b = bee } }"))
    assert rows == [("x", UA)] and stream.columns == ["bee", ROW_KIND_COLUMN]


@pytest.mark.parametrize("block, message", [
    ("FieldMapper { }", "required option 'field_mapper' is missing"),
    ("FieldMapper { field_mapper = {} }", "field_mapper is empty"),
    ("FieldMapper { field_mapper = { a = x, b = x } }", "lists the output field 'x' more than once"),
    ("FieldMapper { field_mapper = { a = [x] } }", "field_mapper.a must be the output field name"),
    ("FieldMapper { field_mapper = [a] }", "option 'field_mapper' must be object"),
    ("FieldMapper { field_mapper = { a = __row_kind } }", "'__row_kind' is reserved"),
])
def test_bad_options_name_plugin_and_option(block, message):
    with pytest.raises(ConfigError) as err:
        load_job_text(job_text(block))
    assert err.value.plugin == "transform[0] FieldMapper" and err.value.option == "field_mapper"
    assert message in str(err.value)
