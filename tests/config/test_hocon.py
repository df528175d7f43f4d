"""SeaTide's HOCON reader gives what Typesafe Config (SeaTunnel's reader) gives.

Each case is a form from the HOCON spec (github.com/lightbend/config, HOCON.md); every
expected value was checked against Typesafe Config 1.4.1 (``ConfigFactory.parseString(text)
.resolve()``, strings read with ``getString``). Where SeaTide refuses what Typesafe Config
quietly accepts, the case says so and why.
"""

from __future__ import annotations

import pickle

import pytest

from seatide.config.hocon import HoconError, parse
from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text


def value(text: str):
    return parse(text, environ={"HOME": "/home/op"}).value


SPEC_CASES = [
    # strings: quoted (JSON escapes), unquoted, triple-quoted (raw)
    ('a = ""', {"a": ""}),
    ('a = "\\u0041\\u00e9\\/\\b\\f\\n\\r\\t\\"\\\\"', {"a": 'Aé/\b\f\n\r\t"\\'}),
    ('a = "\\ud83d\\ude00"', {"a": "\U0001f600"}),                 # a UTF-16 pair is one character
    ('a = """multi\nline "quotes" \\n raw"""', {"a": 'multi\nline "quotes" \\n raw'}),
    ('a = """x""""', {"a": 'x"'}),
    ('a = """"""', {"a": ""}),
    ('a = "  x  "', {"a": "  x  "}),
    ("a = foo   bar   ", {"a": "foo   bar"}),
    ("a = foo//comment", {"a": "foo"}),
    ('a = "x" # comment', {"a": "x"}),
    # lists keep empty strings and null
    ('a = ["", "x", ""]', {"a": ["", "x", ""]}),
    ('a = [""]', {"a": [""]}),
    ('a = [1, "", 2, null]', {"a": [1, "", 2, None]}),
    ("a = [1,]", {"a": [1]}),
    ("a = [ 1 \n 2 ]", {"a": [1, 2]}),
    ("a = [ a b, c ]", {"a": ["a b", "c"]}),
    # value concatenation: text keeps the spaces between values, true stays true
    ('a = "a" b "c"', {"a": "a b c"}),
    ("a = true false", {"a": "true false"}),
    ("a = x null", {"a": "x null"}),
    ('a = hello"world"', {"a": "helloworld"}),
    ("a = 10 seconds", {"a": "10 seconds"}),          # durations stay text until read as one
    ("a = 1 2 3", {"a": "1 2 3"}),
    ("a = 1_000", {"a": "1_000"}),
    ("a = 0x10", {"a": "0x10"}),
    ("a = 1.2.3", {"a": "1.2.3"}),
    ("a = -foo", {"a": "-foo"}),
    ("a = .5", {"a": ".5"}),
    ("a = True", {"a": "True"}),
    ("a = [1] [2]", {"a": [1, 2]}),
    ("a = {x=1} {y=2}", {"a": {"x": 1, "y": 2}}),
    ("a = [ { x = 1 } { y = 2 } ]", {"a": [{"x": 1, "y": 2}]}),
    # a JSON document written without quoting it: the pieces concatenate, quotes go
    ('a = ["{"data":{"c": "a b","d": "true"}}"]', {"a": ['{data:{c: a b,d: true}}']}),
    # numbers, booleans, null
    ("a = 1.5e3", {"a": 1500.0}),
    ("a = -1.5e-3", {"a": -0.0015}),
    ("a = 9223372036854775808", {"a": "9223372036854775808"}),   # beyond 64 bits: text
    ("a = true\nb = null\nc = \"true\"", {"a": True, "b": None, "c": "true"}),
    # keys and paths
    ('"a.b" = 1', {"a.b": 1}),
    ('a."b.c" = 1', {"a": {"b.c": 1}}),
    ("a b c = 1", {"a b c": 1}),
    ('1 = a\ntrue = x\n"" = y', {"1": "a", "true": "x", "": "y"}),
    ('a = { "x y" = 1, x.y = 2, "x.y" = 3 }', {"a": {"x y": 1, "x": {"y": 2}, "x.y": 3}}),
    ("a =\n 1", {"a": 1}),
    ("a\n{ b = 1 }", {"a": {"b": 1}}),
    ("a = 1\n,b=2", {"a": 1, "b": 2}),
    # duplicate keys: objects merge, anything else is replaced
    ("foo { a = 1 }\nfoo { b = 2 }", {"foo": {"a": 1, "b": 2}}),
    ("foo { a = 1 }\nfoo = 3", {"foo": 3}),
    ("foo = 3\nfoo { a = 1 }", {"foo": {"a": 1}}),
    ("a.b = 1\na = {c = 2}", {"a": {"b": 1, "c": 2}}),
    ("a.b.c = 1\na.b.d = 2\na = { e = 3 }", {"a": {"b": {"c": 1, "d": 2}, "e": 3}}),
    ("a = 1\na.b = 2", {"a": {"b": 2}}),
    # substitutions
    ("a = ${b}\nb = 1", {"a": 1, "b": 1}),
    ("b = 1\na = ${b} x", {"a": "1 x", "b": 1}),
    ("a = 1\nb = ${a}\na = 2", {"a": 2, "b": 2}),
    ('a = ${"b.c"}\n"b.c" = 1', {"a": 1, "b.c": 1}),
    ("a = ${ b }\nb = 1", {"a": 1, "b": 1}),
    ("a { b { c = ${a.d} }, d = 1 }", {"a": {"b": {"c": 1}, "d": 1}}),
    ("a = ${?x}\nb = 1", {"b": 1}),
    ("a = 1\na = ${?x}", {"a": 1}),
    ("a = [${?x}, 1]", {"a": [1]}),
    ("a = ${?x} x", {"a": " x"}),
    ("a = x ${?x} y", {"a": "x  y"}),
    ("a = {x = 1}\na = ${b}\nb = {y = 2}", {"a": {"x": 1, "y": 2}, "b": {"y": 2}}),
    ("a = ${HOME}", {"a": "/home/op"}),
    # self-references and +=
    ("b = 1\nb = ${b} 2", {"b": "1 2"}),
    ('p = a\np = ${p}":b"', {"p": "a:b"}),
    ("a = [1]\na += 2", {"a": [1, 2]}),
    ("a = []\na += x\na += y", {"a": ["x", "y"]}),
    ("a = [1]\na += [2]", {"a": [1, [2]]}),
    ("a = ${?b} [1]", {"a": [1]}),
]


@pytest.mark.parametrize(("text", "expected"), SPEC_CASES, ids=[c[0][:40] for c in SPEC_CASES])
def test_spec_forms_read_as_typesafe_config_reads_them(text, expected):
    assert value(text) == expected


@pytest.mark.parametrize(("text", "as_text", "kind"), [
    ("a = 007", "007", int), ("a = 0.10", "0.10", float), ("a = 1.0", "1.0", float),
    ("a = 1E3", "1E3", float), ("a = 5.", "5.", float), ("a = -0", "-0", int)])
def test_numbers_read_as_the_text_they_were_written_as(text, as_text, kind):
    """Typesafe Config's getString gives a number as written: a password 0123 keeps its 0."""
    number = value(text)["a"]
    assert isinstance(number, kind) and str(number) == f"{number}" == as_text
    assert pickle.loads(pickle.dumps(number)) == number and str(pickle.loads(pickle.dumps(number))) == as_text


@pytest.mark.parametrize(("text", "reason", "line"), [
    ("a = [,1]", "expected a list element, found ','", 1),
    ("a : 1 b : 2", "expected a comma, a new line or the end of the file after a value, found ':'", 1),
    ("{ a = 1 b = 2 }", "found '='", 1),
    ('x = 1\na = "\\x"', "\\x is not an escape", 2),
    ('a = "x\ny"', "may not span lines", 1),
    ('a = "\\u00e"', "four hex digits", 1),
    ('a = "\\ud800"', "half of a UTF-16 pair", 1),
    ("a = x=y", "found '='", 1),
    ("a = jdbc:mysql://h:3306/db", "found ':'", 1),
    ("a = $abc", "'$' must start a substitution", 1),
    ("a = 1,,\nb=2", "two commas", 1),
    ("a = ${b}\nb = ${a}", "cycle", None),
    ("x = 5\nx { y = ${x} }", "cycle", None),
    ('a = "x" [1]', "joins an object or a list with text", 1),
    ("a = [1] xyz", "joins an object or a list with text", 1),      # Typesafe Config drops "xyz"
    ('include "other.conf"\na = 1', "'include' is not supported", 1),  # a job is one text
    ("a = {", "not closed", 1),
    ("a.", "ends with a dot", 1),
])
def test_what_typesafe_config_refuses_is_refused_with_the_reason_and_line(text, reason, line):
    with pytest.raises(HoconError) as info:
        value(text)
    assert reason in info.value.reason
    if line is not None:
        assert info.value.line == line


def test_an_undefined_substitution_is_named():
    with pytest.raises(HoconError) as info:
        value("a = 1\nb = ${nope.here}")
    assert (info.value.undefined, info.value.line) == ("nope.here", 2)


JOB = """
env { job.mode = BATCH }
source {
  FakeSource {
    plugin_output = fake
    row.num = 1
    string.fake.mode = template
    string.template = ["", "\\u00e9t\\u00e9", "{"k": "v","b": "true"}"]
    schema = { fields { s = string } }
    password = 0123
  }
}
sink { Console { plugin_input = fake } }
"""


def test_a_job_gets_empty_strings_unicode_escapes_and_number_text_as_written():
    source = load_job_text(JOB).sources[0]
    assert source.plugin.opts["string.template"] == ["", "été", "{k: v,b: true}"]
    assert str(source.block["password"]) == "0123"


def test_a_parse_error_names_the_line_of_the_job_file():
    with pytest.raises(ConfigError) as info:
        load_job_text("env {}\nsource {\n  FakeSource { row.num = [,] }\n}\nsink { Console {} }", source_name="j.conf")
    assert info.value.line == 3
    assert "expected a list element, found ','" in str(info.value)


def test_where_each_value_is_written_is_known_inside_objects_in_lists_too():
    # SeaTunnel's JSON form holds its plugins in lists: a sink's path there is rewritten in place (local_paths)
    text = '{"sink": [{"plugin_name": "LocalFile", "path": "out", "opts": {"deep": "x"}}, {"path": [1, 2]}]}'
    spans = parse(text).spans
    at = spans[("sink", "[0]", "path")][-1]
    assert text[at.start:at.end] == '"out"' and at.quote == '"'
    deep = spans[("sink", "[0]", "opts", "deep")][-1]
    assert text[deep.start:deep.end] == '"x"'
    second = spans[("sink", "[1]", "path", "[1]")][-1]
    assert text[second.start:second.end] == "2"


def test_a_non_ascii_digit_is_text_and_the_reader_moves_on():
    """``str.isdigit`` holds for "²" and "٣", which no number character consumes: the lexer emitted an empty token
    at the same place forever, eating memory until the machine killed the process. A REST submit of ``a = ²`` did
    that to a coordinator (found by tests/api/test_fuzz.py once the submit body gained a field). In a child
    process with a deadline, so the old code fails this test instead of hanging the run."""
    import subprocess
    import sys

    code = "from seatide.config.hocon import parse; print(parse('a = \\u00b2, b = \\u0663x, c = 1\\u00b2').value)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            preexec_fn=lambda: __import__("resource").setrlimit(
                                __import__("resource").RLIMIT_AS, (2 << 30, 2 << 30)))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "{'a': '²', 'b': '٣x', 'c': '1²'}"


def test_a_comment_start_inside_a_substitution_is_refused_not_looped_on():
    """``${//`` made the substitution's reader stop on ``//`` without reading it, again and again: ``parse("a =
    ${//")`` never returned, and one REST submit could hold a coordinator's thread (found by an outside review's
    fuzzer, stop 56). In a child process with a deadline, so the old code fails this test instead of hanging."""
    import subprocess
    import sys

    code = ("from seatide.config.hocon import parse, HoconError\n"
            "for text in ['a = ${//\\n', 'a = ${x//y}', 'a = ${x.//}']:\n"
            "    try:\n        parse(text)\n    except HoconError as exc:\n        print(exc)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            preexec_fn=lambda: __import__("resource").setrlimit(
                                __import__("resource").RLIMIT_AS, (2 << 30, 2 << 30)))
    assert result.returncode == 0, result.stderr[-2000:]
    refusals = result.stdout.strip().splitlines()
    assert len(refusals) == 3 and all("'//' is not allowed in a substitution's path" in r for r in refusals), refusals
    assert all("line 1" in r for r in refusals), refusals
