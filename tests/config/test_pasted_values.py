"""A variable's value arrives in the option exactly as given, wherever its ``${name}`` stands (config/pasted_values.py).

Before, the value was pasted into the text as written and read as HOCON: ``password = ${pw}`` with ``-i pw='ab#x'``
ran with the password ``ab`` (the rest a comment), ``//`` the same, a ``"`` or ``\\`` inside a quoted string broke
it or changed it, and leading spaces, a new line or ``${HOME}`` in a value were lost or looked up. Nobody was told."""

from __future__ import annotations

import pytest

from seatide.config.job_environment import given
from seatide.config.job_text import JobTextError, read_job_text
from seatide.secrets import secret_values

ODD = [
    "ab#x",                 # a comment
    "ab//x",                # a comment too
    'Ab"Cd',                # a quote
    "a\\b\\n",              # backslashes, one before an n
    "x}y",                  # a brace
    "a,b",                  # a comma
    "one\ntwo",             # a new line
    "${HOME}",              # a substitution's text
    "  lead and trail  ",   # spaces at both ends
    "http://h:80/p?a=b",    # ':' and '=' (refused unquoted) and '//'
    "",                     # nothing
    "/data/x/",             # slashes that meet the text's: /base/${v} made a comment of //data
]

PLACES = {
    "a whole value": ("v = ${x}", "{}"),
    "a quoted string": ('v = "pre-${x}-post"', "pre-{}-post"),
    "a triple-quoted string": ('v = """pre-${x}-post"""', "pre-{}-post"),
    "an unquoted concatenation": ("v = /base/${x}/post", "/base/{}/post"),
    "a list": ("v = [first, ${x}, last]", None),
}


def _env(line: str, value: str):
    return read_job_text("env {\n  " + line + "\n  after = kept\n}\n", given({"x": value})).tree["env"]


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("value", ODD)
def test_a_value_arrives_exactly_as_given_wherever_it_stands(value, place):
    line, expected = PLACES[place]
    env = _env(line, value)
    assert env["v"] == (["first", value, "last"] if expected is None else expected.format(value))
    assert env["after"] == "kept"


@pytest.mark.parametrize("value", ODD)
def test_a_value_standing_as_a_key_is_one_key_holding_it(value):
    env = _env("${x} = 1", value)
    assert env[value] == 1 and env["after"] == "kept"


@pytest.mark.parametrize("value, read", [("2", 2), ("-7", -7), ("0.10", 0.1), ("true", True), ("false", False),
                                         ("null", None), ("orders", "orders"), ("/data/in", "/data/in")])
def test_numbers_booleans_and_plain_words_are_read_as_before(value, read):
    got = _env("v = ${x}", value)["v"]
    assert repr(got) == repr(read)
    assert str(got) == value or isinstance(read, bool) or read is None       # a number keeps its text (0.10)


def test_a_key_that_is_a_dotted_word_is_a_path_as_before():
    assert _env("${x} = 1", "a.b")["a"] == {"b": 1}


def test_a_whole_list_object_or_quoted_string_is_read_as_hocon_as_seatunnel_reads_it():
    assert _env("v = ${x}", "['abc','d~f','hi']")["v"] == ["'abc'", "'d~f'", "'hi'"]
    assert _env("v = ${x}", "{a = 1, b = [2]}")["v"] == {"a": 1, "b": [2]}
    assert _env("v = ${x}", '"a,b \\"c\\""')["v"] == 'a,b "c"'
    assert _env('v = "in ${x}"', '"a,b"')["v"] == "in a,b"          # its content, wherever it stands
    assert _env("v = ${x}", '"""one\ntwo"""')["v"] == "one\ntwo"
    # not a whole one: a comment after it, two joined, a substitution inside: text, as given
    for value in ("[a] # b", "[a] [b]", "[${HOME}]", '"a" b', "[unclosed"):
        assert _env("v = ${x}", value)["v"] == value


def test_a_comment_is_not_filled_in_and_a_default_is_pasted_as_written():
    # A default is the text's own, pasted as it always was (tests/config/test_defaults_raw.py).
    text = 'env {\n  # ${x}\n  v = ${y:"a,b"}\n  w = "${z:}"\n  u = [${z:a,b}]\n}\n'
    env = read_job_text(text, given({"x": "one\n} broken = {"})).tree["env"]
    assert env == {"v": "a,b", "w": "", "u": ["a", "b"]}


def test_a_json_job_file_gets_the_value_as_given():
    text = '{"env": {"job.mode": "BATCH", "job.name": "${x}", "parallelism": ${p}}}'
    env = read_job_text(text, given({"x": 'a"b\\c#d', "p": "2"})).tree["env"]
    assert env["job.mode"] == "BATCH" and env["job.name"] == 'a"b\\c#d' and env["parallelism"] == 2


def test_a_value_that_would_close_its_triple_quoted_string_is_refused_naming_the_variable_only():
    for line, value in (('v = """pre ${x} post"""', 'a"""Se-cr3t'), ('v = """pre ""${x} post"""', '"Se-cr3t')):
        with pytest.raises(JobTextError) as caught:
            _env(line, value)
        assert "variable x cannot stand inside the \"\"\"triple-quoted\"\"\" string on line 2" in caught.value.reason
        assert caught.value.line == 2 and "cr3t" not in caught.value.reason


def test_lines_and_spans_after_escaped_values_are_those_of_the_text_as_written():
    text = 'env {\n  a = ${x}\n  b = "${x}"\n}\nsource {\n  FakeSource {\n    bogus = 1\n  }\n}\n'
    job = read_job_text(text, given({"x": 'l1\nl2 "q" \\ #'}))
    assert job.keys[("source[0]", "bogus")] == 7 and job.sites[("source", 0)].line == 6
    (span,) = job.spans[("source", "__seatide_block_source_0", "bogus")]
    assert text[span.start:span.end] == "1"


def test_a_secret_value_is_masked_as_it_arrives():
    """A secret given as a quoted string (``-i pw='"p,w x"'``) arrives as its content: that is what is masked."""
    text = 'env { secret.variables = [tenant] }\nsource { FakeSource { table = "t_${tenant}" } }\nsink { Console {} }\n'
    variables = given({"tenant": '"ACME 7731"'})
    assert "ACME 7731" in secret_values(text, variables)
    assert read_job_text(text, variables).tree["source"]["__seatide_block_source_0"]["table"] == "t_ACME 7731"
