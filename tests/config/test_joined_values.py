"""A value written as a quoted string beside another string joins it (config/filling.py, outside review H1).

Adjacent quoted strings concatenate with nothing between, so ``"a"`` then ``"b"`` means ``"ab"``; but ``""`` then
``"b"`` is ``\"\"\"b"``: a triple-quoted string. Before, a value written quoted right after ``""`` or a closing
``\"\"\"``, or an empty one between quotes, merged into one: read changed or refused. SeaTunnel's FAQ writes
``'"${city}"'`` in a quoted SQL string; with an empty city main read ``city =''`` and the branch refused it."""

from __future__ import annotations

import pytest

from seatide.config.job_environment import given
from seatide.config.job_text import JobTextError, read_job_text

FAQ = "env { query = \"select * from v where city ='\"${city}\"' and dt = '\"${date}\"'\" }"
AFFIXED = "env { k = ${prefix}${name}${suffix} }"

CASES = [
    (FAQ, {"city": "", "date": "2024"}, "select * from v where city ='' and dt = '2024'"),
    (FAQ, {"city": "Paris", "date": "2024-01-01"}, "select * from v where city ='Paris' and dt = '2024-01-01'"),
    (FAQ, {"city": "a b", "date": 'x"y'}, "select * from v where city ='a b' and dt = 'x\"y'"),
    (AFFIXED, {"prefix": '""', "name": "abc def", "suffix": '""'}, "abc def"),
    (AFFIXED, {"prefix": '""', "name": "abc", "suffix": '""'}, "abc"),
    (AFFIXED, {"prefix": "", "name": "a b", "suffix": ""}, "a b"),
    (AFFIXED, {"prefix": "", "name": "", "suffix": ""}, ""),
    ('env { k = ""${name} }', {"name": "a b"}, "a b"),
    ('env { k = ""${name}"" }', {"name": ""}, ""),
    ('env { k = ${name}"q" }', {"name": ""}, "q"),
    ('env { k = """t"""${name} }', {"name": 'a "b'}, 'ta "b'),
    ('env { k = """t"""${name} }', {"name": '"""'}, 't"""'),
    ('env { k = """${name}"""" }', {"name": 'a""'}, 'a"""'),      # outside review L3: refused before
    ('env { k = """select 1"""${name}"""z""" }', {"name": "a b"}, "select 1a bz"),     # the review's c4
    ('env { k = """s"""${name}"""z""" }', {"name": 'a""'}, 'sa""z'),
]


@pytest.mark.parametrize("text, values, value", CASES)
def test_a_value_beside_a_string_arrives_as_given(text, values, value):
    env = read_job_text(text, given(values)).tree["env"]
    assert env == {next(iter(env)): value}


def test_a_value_that_would_close_the_triple_quoted_string_it_joins_is_refused_naming_only_the_variable():
    with pytest.raises(JobTextError) as caught:
        read_job_text('env {\n  k = """t"""${name} tail\n}', given({"name": 'Se"""cr3t'}))
    assert "variable name" in caught.value.reason and "cr3t" not in caught.value.reason and caught.value.line == 2


def test_many_defaults_never_closed_are_read_in_linear_time():
    """Each ``${a:`` with no ``}`` after it scanned to the text's end: 8,000 lines took 9 s raw, 15 s as given
    (outside review L1). A placeholder ends at a ``}``: none is looked for after the last one."""
    import time

    text = "env {\n" + "".join(f"k{i} = ${{a:x\n" for i in range(8000))
    started = time.perf_counter()
    for variables in ({"a": "q"}, given({"a": "q"})):
        with pytest.raises(JobTextError):
            read_job_text(text, variables)
    assert time.perf_counter() - started < 3.0


@pytest.mark.parametrize("value", [" [a, b] ", "\n[a, b]", "[a, b]  "])
def test_a_whole_list_with_spaces_around_it_is_a_list(value):
    """Outside review L4: spaces around a list made it a string, silently (main and SeaTunnel read a list)."""
    assert read_job_text("env { k = ${v} }", given({"v": value})).tree == {"env": {"k": ["a", "b"]}}
