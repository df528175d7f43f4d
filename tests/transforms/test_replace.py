"""Replace: literal and regex replacement in one field."""

from __future__ import annotations

import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.plugin.rowkind import ROW_KIND_COLUMN, RowKind
from seatide.transforms.fields import TransformInputError
from seatide.transforms.java_regex import first_match_regex, syntax_error
from tests.transforms.conftest import frame, job_text, rows_of, transform_from

I, UB = RowKind.INSERT, RowKind.UPDATE_BEFORE


@pytest.fixture
def names(spark):
    return frame(spark, [("Joy Ding", 20, I), ("a.b.c", 21, UB), (None, 22, I)], "name string, age int")


def replace(options: str):
    return transform_from(f'Replace {{ replace_field = name, {options} }}')


def test_literal_pattern_replaces_every_occurrence_and_regex_chars_are_plain(names, ctx):
    out = replace('pattern = ".", replacement = "_"').apply(names, ctx)
    assert out.columns == ["name", "age", ROW_KIND_COLUMN]
    assert rows_of(out) == [("Joy Ding", 20, I), ("a_b_c", 21, UB), (None, 22, I)]


def test_regex_replaces_all_matches_with_group_references(names, ctx):
    out = replace(r'pattern = "(\\w+) (\\w+)", replacement = "$2, $1", is_regex = true').apply(names, ctx)
    assert ("Ding, Joy", 20, I) in rows_of(out)


def test_replace_first_changes_only_the_first_match(names, ctx):
    out = replace(r'pattern = "\\.", replacement = "-", is_regex = true, replace_first = true').apply(names, ctx)
    assert ("a-b.c", 21, UB) in rows_of(out)


def test_replace_first_is_ignored_without_regex_as_in_seatunnel(names, ctx):
    out = replace('pattern = ".", replacement = "-", replace_first = true').apply(names, ctx)
    assert ("a-b-c", 21, UB) in rows_of(out)


def test_replace_first_keeps_back_references_and_lookbehinds(spark, ctx):
    df = frame(spark, [("xaa-bb-cc", I)], "name string")
    out = replace(r'pattern = "(?<=-)(\\w)\\1", replacement = "<$1$1>", is_regex = true, '
                  'replace_first = true').apply(df, ctx)
    assert rows_of(out) == [("xaa-<bb>-cc", I)]


@pytest.mark.parametrize("pattern, replacement, text, expected", [
    (r"(a)(b)?", "[$1|$2]", "zab ab", "z[a|b] ab"),
    ("x*", "-", "abc", "-abc"),
    (r"\d", "$0$0", "a1b2", "a11b2"),
    ("(?<n>o)", "${n}0", "foo", "fo0o"),
    (r"(a)\1", r"\$", "aab", "$b"),
])
def test_first_match_regex_behaves_like_java_replace_first(spark, pattern, replacement, text, expected):
    from pyspark.sql import functions as F

    regex, repl = first_match_regex(pattern, replacement)
    got = spark.range(1).select(F.regexp_replace(F.lit(text), F.lit(regex), F.lit(repl))).first()[0]
    assert got == expected


def test_a_number_field_becomes_its_replaced_text(names, ctx):
    out = transform_from('Replace { replace_field = age, pattern = "2", replacement = "x" }').apply(names, ctx)
    assert sorted(r[1] for r in rows_of(out)) == ["x0", "x1", "xx"]


def test_missing_field_names_it(names, ctx):
    with pytest.raises(TransformInputError, match=r"Replace: replace_field names field 'nme'.*available fields: name, age"):
        transform_from('Replace { replace_field = nme, pattern = a, replacement = b }').apply(names, ctx)


def test_replace_on_a_stream(stream):
    rows = stream.run([{"name": "a b", "kind": 1}], "name string",
                      transform_from('Replace { replace_field = name, pattern = " ", replacement = "_" }'))
    assert rows == [("a_b", UB)]


@pytest.mark.parametrize("pattern", [r"\\p{Lu}+", r"(?<year>\\d{4})\\k<year>", r"a\\z", r"\\Q(\\E", "a++b",
                                     r"x(?i)y", r"[a-z&&[^aeiou]]", r"\\h\\R"])
def test_java_only_regex_syntax_passes_validation(pattern):
    replace(f'pattern = "{pattern}", replacement = x, is_regex = true')


def test_regex_syntax_checker_catches_common_mistakes():
    assert syntax_error("(ab") and syntax_error("*a") and syntax_error("a\\")
    assert syntax_error(r"[\p{L}]+") is None


@pytest.mark.parametrize("options, option, message", [
    ('pattern = "(a", replacement = b, is_regex = true', "pattern", "not a valid regular expression"),
    ('pattern = "", replacement = b', "pattern", "pattern is empty"),
    ('replacement = b', "pattern", "required option 'pattern' is missing"),
    ('pattern = a, replacement = b, is_regex = maybe', "is_regex", "must be boolean"),
])
def test_bad_options_name_plugin_and_option(options, option, message):
    with pytest.raises(ConfigError) as err:
        load_job_text(job_text(f"Replace {{ replace_field = name, {options} }}"))
    assert err.value.plugin == "transform[0] Replace" and err.value.option == option
    assert message in str(err.value)


def test_pattern_only_java_rejects_is_caught_before_the_query_runs(names, ctx):
    transform = replace('pattern = "(?P<n>a)", replacement = b, is_regex = true')   # Python syntax
    with pytest.raises(TransformInputError, match="Replace: pattern is not a valid Java regular expression"):
        transform.apply(names, ctx)
