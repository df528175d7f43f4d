"""A default (``${name:default}``) is part of the text: it is pasted as written, as it always was, in every row
(config/filling.py, outside review H3). Only the user's values (``-i``, a REST request's ``variables``) are written
as given. Before, a text with no variables at all changed meaning under the new rule: `` nightly`` kept its space,
``${x:2 }`` became a string, ``"${x:C:\\\\data}"`` doubled its backslash, ``${dir:${HOME}}/ckpt`` no longer parsed."""

from __future__ import annotations

import pytest

from seatide.config.job_environment import given, marked
from seatide.config.job_text import JobTextError, read_job_text

# (text, the tree main read it as), from the review's c1.py.
DEFAULTS = [
    ("env { k = ${x: 2} }", 2),
    ("env { k = ${x:2 } }", 2),
    ('env { k = "${x:C:\\\\data}" }', "C:\\data"),
    ('env { k = "${x:\\\\d+}" }', "\\d+"),
    ("env { k = ${x:${HOME}} }", "/home/op"),
    ("env { k = [${x:a,b}] }", ["a", "b"]),
    ('env { k = "${x:}" }', ""),
    ('env { k = ${x:"a" "b"} }', "a b"),
    ("env { k = ${x:'a b'} }", "'a b'"),
    ('env { k = "a-${x:\\"q\\"}-b" }', 'a-"q"-b'),
    ("env { k = ${x: nightly} }", "nightly"),
    ("env { k = ${dir:${HOME}}/ckpt }", "/home/op/ckpt"),
    ('env { k = """a ${x:b"} c""" }', 'a b" c'),
]


@pytest.mark.parametrize("text, value", DEFAULTS)
@pytest.mark.parametrize("rule", [given, lambda values: marked(values, {"HOME": "/home/op"}), dict],
                         ids=["check", "submitted", "old-row"])
def test_a_default_reads_as_it_always_did(text, value, rule, monkeypatch):
    monkeypatch.setenv("HOME", "/home/op")
    assert read_job_text(text, rule({})).tree == {"env": {"k": value}}
    assert read_job_text(text, rule({"other": "x"})).tree == {"env": {"k": value}}      # with a value given too


@pytest.mark.parametrize("text", ["env { k = ${x:a#b} }", "env { k = ${x:} }"])
def test_a_default_that_never_parsed_still_does_not(text):
    with pytest.raises(JobTextError):
        read_job_text(text, given({}))


def test_a_given_value_beside_a_default_is_still_written_as_given():
    tree = read_job_text('env { k = [${x:a,b}], v = "${y}" }', given({"y": 'q"\\'})).tree
    assert tree == {"env": {"k": ["a", "b"], "v": 'q"\\'}}
