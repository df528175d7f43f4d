"""A job row keeps the rule its variables were stored under (config/filling.py, outside review H2).

Values once were pasted into the text raw and read as HOCON; now a submit writes them as given and marks its row
(``job_environment.AS_GIVEN``). A row stored before has no mark: a restarted driver, a resume from its checkpoint,
its outline and its events must read it as it always was read. Before the mark, the new code re-read such a row
with the new rule: ``${base}`` holding ``${HOME}`` became the text ``${HOME}``, ``[${tables}]`` holding
``orders, items`` one table named ``orders, items``, an escaped backslash in ``"${pw}"`` two backslashes, a
streaming job resumed after an upgrade read other tables, paths and passwords."""

from __future__ import annotations

import json

import pytest

from seatide.config.job_environment import AS_GIVEN, marked, split
from seatide.config.job_text import read_job_text
from seatide.intents import resumed_variables

C9 = 'source { FakeSource { path = ${base}/in, tables = [${tables}], password = "${pw}" } }'
C9_VALUES = {"base": "${HOME}", "tables": "orders, items", "pw": "s3\\\\cret"}
HOME = {"$env": "1", "$env.HOME": "/home/op"}

# (text, the user's values, the tree an unmarked row read on main), from the review's c1.py and c9.py.
OLD_ROWS = [
    (C9, C9_VALUES,
     {"source": {"__seatide_block_source_0": {"path": "/home/op/in", "tables": ["orders", "items"],
                                              "password": "s3\\cret"}}}),
    ("env { k = ${x} }", {"x": "${HOME}"}, {"env": {"k": "/home/op"}}),
    ('env { k = "${x}" }', {"x": "C:\\new"}, {"env": {"k": "C:\new"}}),
    ("env { k = [${x}] }", {"x": '"a","b"'}, {"env": {"k": ["a", "b"]}}),
    ("env { k { ${x} } }", {"x": "a = 1, b = 2"}, {"env": {"k": {"a": 1, "b": 2}}}),
    ("env { k = ${x} }", {"x": "ab   "}, {"env": {"k": "ab"}}),
    ("env { k = ${x} }", {"x": "  ab"}, {"env": {"k": "ab"}}),
    ("env { k = ${x} }", {"x": "[a] [b]"}, {"env": {"k": ["a", "b"]}}),
]


@pytest.mark.parametrize("text, values, tree", OLD_ROWS)
@pytest.mark.parametrize("environment", [HOME, {}], ids=["recorded", "before-environments"])
def test_an_unmarked_row_reads_as_it_always_did(text, values, tree, environment, monkeypatch):
    monkeypatch.setenv("HOME", "/home/op")      # a row from before environments were recorded reads the process's
    assert read_job_text(text, {**values, **environment}).tree == tree


def test_a_marked_row_gets_each_value_as_given():
    tree = read_job_text(C9, marked(C9_VALUES, {"HOME": "/home/op"})).tree["source"]["__seatide_block_source_0"]
    assert tree == {"path": "${HOME}/in", "tables": ["orders, items"], "password": "s3\\\\cret"}


def test_a_submit_marks_its_row_and_a_resume_keeps_an_old_rows_rule_unless_given_new_values():
    assert marked({"x": "1"}, {})[AS_GIVEN] == "1" and split(marked({"x": "1"}, {}))[0] == {"x": "1"}
    old = {"x": "a, b", **HOME}
    assert resumed_variables(old, False, None, None) == (old, False)                    # nothing new: as stored
    assert AS_GIVEN not in resumed_variables(old, True, None, None)[0]                  # a new text, the old values
    assert AS_GIVEN not in resumed_variables(old, False, None, {"HOME": "/x"})[0]       # a new environment
    assert resumed_variables(old, False, {"x": "a, b"}, None)[0][AS_GIVEN] == "1"       # new values: as given
    new = marked({"x": "a, b"}, {})
    assert resumed_variables(new, True, None, None)[0][AS_GIVEN] == "1"                 # a marked row stays marked



def test_the_plan_view_reads_an_old_row_as_its_driver_does():
    """The REST plan of a row stored before values were written as given reads it by its own rule, as the driver
    does: ``t  # the output`` was pasted raw then, so the source's output is ``t`` and the sink reads it (second
    outside review, M1: the view read it as given and drew a plan the driver does not run)."""
    from seatide.api.inspection import _plan_shape

    text = ('source { FakeSource { plugin_output = ${out}\n row.num = 1, schema = { fields { id = int } } } }\n'
            'sink { Console { plugin_input = "t" } }\n')
    old_row = {"out": "t  # the output", "$env": "1"}
    assert read_job_text(text, old_row).tree["source"]    # the driver's read parses
    pipelines, error = _plan_shape("old-row", text, json.dumps(old_row))
    assert error is None, error
    plugins = [p for pipeline in pipelines for p in pipeline["plugins"]]
    assert [(p["kind"], p["output"]) for p in plugins][0] == ("source", "t")
    sink = [p for p in plugins if p["kind"] == "sink"]
    assert len(sink) == 1 and sink[0]["inputs"], plugins     # the sink reads the source's t
