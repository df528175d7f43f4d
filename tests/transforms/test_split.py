"""Split: one field into several, as Java's String.split(separator, n)."""

from __future__ import annotations

import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.plugin.rowkind import ROW_KIND_COLUMN, RowKind
from seatide.transforms.fields import TransformInputError
from tests.transforms.conftest import frame, job_text, rows_of, transform_from

I, D = RowKind.INSERT, RowKind.DELETE


def split(options: str):
    return transform_from(f"Split {{ split_field = name, {options} }}")


def test_seatunnel_doc_example(spark, ctx):
    df = frame(spark, [("Joy Ding", 20, I), ("Kin Dom", 21, D)], "name string, age int")
    out = split('separator = " ", output_fields = [first_name, second_name]').apply(df, ctx)
    assert out.columns == ["name", "age", "first_name", "second_name", ROW_KIND_COLUMN]
    assert rows_of(out) == [("Joy Ding", 20, "Joy", "Ding", I), ("Kin Dom", 21, "Kin", "Dom", D)]


def test_last_field_takes_the_rest_missing_parts_and_null_input_are_null(spark, ctx):
    df = frame(spark, [("a,b,c,d", I), ("a", I), (None, D), ("a,,", I)], "name string")
    out = split('separator = ",", output_fields = [x, y, z]').apply(df, ctx)
    assert rows_of(out) == [("a", "a", None, None, I), ("a,,", "a", "", "", I),
                            ("a,b,c,d", "a", "b", "c,d", I), (None, None, None, None, D)]


def test_separator_is_a_regex_and_an_existing_output_is_overwritten(spark, ctx):
    df = frame(spark, [("a1b22c", "old", I)], "name string, y string")
    out = split(r'separator = "\\d+", output_fields = [x, y]').apply(df, ctx)
    assert out.columns == ["name", "y", "x", ROW_KIND_COLUMN]
    assert rows_of(out) == [("a1b22c", "b22c", "a", I)]


def test_missing_split_field_names_it(spark, ctx):
    df = frame(spark, [("a", I)], "other string")
    with pytest.raises(TransformInputError, match=r"Split: split_field names field 'name'.*\(available fields: other\)"):
        split('separator = ",", output_fields = [x]').apply(df, ctx)


def test_split_on_a_stream(stream):
    rows = stream.run([{"name": "p-q", "kind": 3}], "name string",
                      split('separator = "-", output_fields = [a, b]'))
    assert rows == [("p-q", "p", "q", D)]


@pytest.mark.parametrize("options, option, message", [
    ('separator = "(", output_fields = [a]', "separator", "is not valid"),
    ('separator = "", output_fields = [a]', "separator", "separator is empty"),
    ('separator = ",", output_fields = []', "output_fields", "output_fields is empty"),
    ('separator = ",", output_fields = [a, a]', "output_fields", "'a' more than once"),
    ('separator = ",", output_fields = [__row_kind]', "output_fields", "reserves for the row kind"),
    ('separator = ","', "output_fields", "required option 'output_fields' is missing"),
])
def test_bad_options_name_plugin_and_option(options, option, message):
    with pytest.raises(ConfigError) as err:
        load_job_text(job_text(f"Split {{ split_field = name, {options} }}"))
    assert err.value.plugin == "transform[0] Split" and err.value.option == option
    assert message in str(err.value)
