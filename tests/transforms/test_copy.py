"""Copy: copy fields into new or existing fields."""

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
    return frame(spark, [("Joy Ding", 20, 123, I), ("Kin Dom", 21, 7, D)], "name string, age int, card int")


def test_copies_append_new_fields_in_the_order_written(cards, ctx):
    out = transform_from("Copy { fields { name1 = name, name2 = name, age1 = age } }").apply(cards, ctx)
    assert out.columns == ["name", "age", "card", "name1", "name2", "age1", ROW_KIND_COLUMN]
    assert rows_of(out) == [("Joy Ding", 20, 123, "Joy Ding", "Joy Ding", 20, I),
                            ("Kin Dom", 21, 7, "Kin Dom", "Kin Dom", 21, D)]
    assert dict(out.dtypes)["age1"] == "int"


def test_copy_onto_an_existing_field_overwrites_it_in_place(cards, ctx):
    out = transform_from("Copy { fields { age = card } }").apply(cards, ctx)
    assert out.columns == ["name", "age", "card", ROW_KIND_COLUMN]
    assert rows_of(out) == [("Joy Ding", 123, 123, I), ("Kin Dom", 7, 7, D)]


def test_deprecated_src_and_dest_field(cards, ctx):
    out = transform_from("Copy { src_field = name, dest_field = name_copy }").apply(cards, ctx)
    assert out.columns[-2:] == ["name_copy", ROW_KIND_COLUMN]


def test_missing_source_field_names_it(cards, ctx):
    with pytest.raises(TransformInputError, match="Copy: fields names field 'nope', which the input "
                       r"does not have \(available fields: name, age, card\)"):
        transform_from("Copy { fields { x = nope } }").apply(cards, ctx)


def test_copy_on_a_stream(stream):
    rows = stream.run([{"a": 1, "kind": 3}], "a int", transform_from("Copy { fields { b = a } }"))
    assert rows == [(1, 1, D)] and stream.columns == ["a", "b", ROW_KIND_COLUMN]


@pytest.mark.parametrize("block, option, message", [
    ("Copy { }", "fields", "set fields { new_field = source_field }"),
    ("Copy { src_field = a }", "dest_field", "dest_field is missing"),
    ("Copy { fields = {} }", "fields", "fields is empty"),
    ("Copy { fields { a = [b] } }", "fields", "fields.a must name the source field"),
    ("Copy { fields { __row_kind = a } }", "fields", "'__row_kind' is reserved"),
    ("Copy { src_field = a, dest_field = __row_kind }", "dest_field", "'__row_kind' is reserved"),
])
def test_bad_options_name_plugin_and_option(block, option, message):
    with pytest.raises(ConfigError) as err:
        load_job_text(job_text(block))
    assert err.value.plugin == "transform[0] Copy" and err.value.option == option
    assert message in str(err.value)

