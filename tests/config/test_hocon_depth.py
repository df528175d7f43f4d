"""Deep text never takes the reader down: nesting past a fixed limit is refused with a message
that names the line, the limit and the fix; long substitution chains, which a job file may
legitimately hold (one key appended to 200 times), read as before, however long.

Before this, 5,000 nested objects or lists, a 5,000-long chain or 5,000 self-appends ended in
Python's RecursionError (a traceback from ``seatide check``, a 500 from REST)."""

from __future__ import annotations

import pytest

from seatide.config.hocon import MAX_NESTING, HoconError, parse
from seatide.config.job_text import JobTextError, read_job_text

DEEP = 5000


def value(text: str):
    return parse(text, environ={}).value


@pytest.mark.parametrize("shape, text", [
    ("objects", "env {}\nx = " + "{a = " * DEEP + "1" + "}" * DEEP),
    ("objects without =", "env {}\nx " + "{a " * DEEP + "{}" + "}" * DEEP),
    ("lists", "env {}\nx = " + "[" * DEEP + "]" * DEEP),
    ("a dotted key", "env {}\n" + ".".join(["a"] * DEEP) + " = 1"),
    ("lists inside objects", "env {}\nx = " + "{a = [" * (DEEP // 2) + "]}" * (DEEP // 2)),
])
def test_nesting_past_the_limit_is_refused_with_its_line_and_limit(shape, text):
    with pytest.raises(JobTextError) as caught:
        read_job_text(text)
    assert caught.value.line == 2
    assert f"more than {MAX_NESTING} levels" in caught.value.reason
    assert "flatter" in caught.value.reason


def test_nesting_up_to_the_limit_reads():
    levels = MAX_NESTING
    tree = value("x = " + "{a = " * (levels - 1) + "[1]" + "}" * (levels - 1))["x"]
    for _ in range(levels - 1):
        tree = tree["a"]
    assert tree == [1]
    with pytest.raises(HoconError, match=f"more than {MAX_NESTING} levels"):
        value("x = " + "{a = " * levels + "[1]" + "}" * levels)


def test_a_deep_value_built_by_substitutions_is_refused_not_a_recursion_error():
    text = "".join(f"x{i} = [${{x{i + 1}}}]\n" for i in range(DEEP)) + f"x{DEEP} = 1"
    with pytest.raises(HoconError, match=f"more than {MAX_NESTING} levels deep") as caught:
        value(text)
    assert caught.value.line is not None


# What the reader has always read, at lengths a job file may reach: a resolution that recurses
# a level per link must not refuse these (a step budget once did).

def test_two_hundred_appends_to_one_key_read():
    assert value("".join(f"a += [{i}]\n" for i in range(200)))["a"] == [[i] for i in range(200)]


def test_a_150_long_chain_written_in_reverse_reads():
    text = "".join(f"k{i} = ${{k{i + 1}}}\n" for i in range(1, 150)) + "k150 = 1\n"
    got = value(text)
    assert all(got[f"k{i}"] == 1 for i in range(1, 151))


def test_two_hundred_self_appends_read():
    text = "a = []\n" + "".join(f"a = ${{a}} [{i}]\n" for i in range(200))
    assert value(text)["a"] == list(range(200))


def test_an_object_merged_two_hundred_times_reads():
    text = "".join(f"o {{ k{i} = {i} }}\n" for i in range(200)) + \
        "p = {}\n" + "".join(f"p = ${{p}} {{ k{i} = {i} }}\n" for i in range(200))
    got = value(text)
    assert got["o"] == {f"k{i}": i for i in range(200)} == got["p"]


@pytest.mark.parametrize("shape, text, key, expected", [
    ("reverse chain", "".join(f"k{i} = ${{k{i + 1}}}\n" for i in range(DEEP)) + f"k{DEEP} = done",
     "k0", "done"),
    ("self-appends", "a = []\n" + "".join(f"a = ${{a}} [{i}]\n" for i in range(DEEP)), "a", list(range(DEEP))),
    ("appends", "".join(f"a += {i}\n" for i in range(DEEP)), "a", list(range(DEEP))),
    ("optional self-references", "a = 1\n" + "a = ${?a}\n" * DEEP, "a", 1),
])
def test_a_5000_long_chain_reads_without_a_recursion_error(shape, text, key, expected):
    assert value(text)[key] == expected


def test_a_long_cycle_is_still_a_cycle_and_its_message_stays_short():
    text = "".join(f"k{i} = ${{k{i + 1}}}\n" for i in range(DEEP)) + f"k{DEEP} = ${{k0}}"
    with pytest.raises(HoconError, match="cycle") as caught:
        value(text)
    assert len(caught.value.reason) < 300


# A value holding another twice, over and over, doubles each time: 26 lines make 2^26 elements.
# Walking each value to check its depth once took 33 s at 22 lines; the size is now capped.

@pytest.mark.parametrize("shape", ["[${a%d}, ${a%d}]", "{x = ${a%d}, y = ${a%d}}", "${a%d} ${a%d}"])
def test_a_value_doubled_over_and_over_is_refused_naming_its_line(shape):
    text = "a0 = {v = 1}\n" if shape.startswith("{") else "a0 = [1]\n"
    text += "".join(f"a{i} = {shape % (i - 1, i - 1)}\n" for i in range(1, 26))
    with pytest.raises(HoconError, match="substitutions build a value of more than 1,000,000 elements") as caught:
        value(text)
    assert caught.value.line is not None and 18 <= caught.value.line <= 22


def test_many_keys_each_a_large_value_are_refused_as_one_value():
    text = "a0 = [1]\n" + "".join(f"a{i} = [${{a{i - 1}}}, ${{a{i - 1}}}]\n" for i in range(1, 18))
    text += "".join(f"k{i} = ${{a17}}\n" for i in range(20))
    with pytest.raises(HoconError, match="more than 1,000,000 elements") as caught:
        value(text)
    assert caught.value.line >= 18     # a17, or one of the keys holding it


def test_twenty_thousand_appends_read():
    # each value's depth was found by a walk of the whole value: quadratic, 98 s
    assert value("a = []\n" + "".join(f"a += {i}\n" for i in range(20000)))["a"] == list(range(20000))


def test_an_object_grown_by_five_thousand_self_references_reads():
    got = value("a = {}\n" + "".join(f"a = ${{a}} {{k{i} = {i}}}\n" for i in range(5000)))["a"]
    assert got == {f"k{i}": i for i in range(5000)}


def test_an_attempt_started_again_goes_on_from_the_field_it_stopped_at(monkeypatch):
    # 600 fields, 46 objects deep, each a chain that stops an attempt: the object's fields were
    # walked from the first at every restart (fields x restarts; 8,000 fields took 30 s)
    from seatide.config.hocon import resolve

    calls = []
    original = resolve.Resolver._value
    monkeypatch.setattr(resolve.Resolver, "_value", lambda self, raw: calls.append(1) or original(self, raw))
    fields = "\n".join(f"f{i} = ${{g{i}}}" for i in range(600))
    text = "a = " + "{ b = " * 46 + "{\n" + fields + "\n}" + " }" * 46 + "\n"
    text += "\n".join(f"g{i} = ${{h{i}}}\nh{i} = ${{k{i}}}\nk{i} = {i}" for i in range(600)) + "\n"
    tree = value(text)["a"]
    for _ in range(46):
        tree = tree["b"]
    assert tree == {f"f{i}": i for i in range(600)}
    assert len(calls) < 100 * 600       # a descent of 46 levels per restart, not every field again
