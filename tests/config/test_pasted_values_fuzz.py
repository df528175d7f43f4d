"""Random texts around ``${x}`` / ``${y}`` with awkward values: each arrives as given (config/filling.py).

The oracle: the same text with plain words in the values' place (``QQXQQ``), each then replaced by its value in
the tree. A refusal is allowed only where a value cannot stand (a \"\"\" string it would close); anything else
read differently, or refused, is a fault. Before (outside review H1), a value written as a quoted string right
after ``""`` or a closing ``\"\"\"``, or an empty one beside a quote, merged into a \"\"\" string: read changed, or
refused. Bounded and seeded: the same few thousand texts every run."""

from __future__ import annotations

import random

from seatide.config.job_environment import given
from seatide.config.job_text import JobTextError, read_job_text
from seatide.config.pasted_values import arrives_as

SNIPS = ['k = ', 'm = ', '""', '"', '"""', '"""t"""', 'a', ' ', '\n', '/', '#', '//', ',', '[', ']', '{', '}',
         '${x}', '${x}', '${y}', '=', '"q"', "'", 'b/', '/c', '+=', ':', '\\']
VALS = ['a b', '', '"', '""', 'q""', '""""', '/', '//', '#', 'x/', '/x', ' ', '\n', '\\', 'a,b', '}', '{', ']', '[',
        '${HOME}', 'p"q', ': ', '=', "'", '"a b"']
MARKS = {"x": "QQXQQ", "y": "QQYQQ"}


def _walk(value, change):
    if isinstance(value, dict):
        return {_walk(k, change): _walk(v, change) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, change) for v in value]
    return change(value) if isinstance(value, str) else value


def test_random_texts_get_each_value_as_given_or_a_refusal_naming_a_triple_quoted_string():
    rng = random.Random(20261203)
    faults, compared = [], 0
    for _ in range(25000):
        body = "".join(rng.choice(SNIPS) for _ in range(rng.randint(2, 9)))
        if "${x}" not in body:
            continue
        text = "env {\n k0 = 1\n " + body + "\n}"
        values = {"x": rng.choice(VALS), "y": rng.choice(VALS)}
        try:
            reference = read_job_text(text, given(MARKS)).tree
        except JobTextError:
            continue
        expected = _walk(reference, lambda s: s.replace("QQXQQ", arrives_as(values["x"]))
                         .replace("QQYQQ", arrives_as(values["y"])))
        try:
            got = read_job_text(text, given(values)).tree
        except JobTextError as exc:
            if "triple-quoted" not in exc.reason:
                faults.append((text, values, exc.reason))
            continue
        compared += 1
        if got != expected:
            faults.append((text, values, got, expected))
    assert compared > 700 and not faults, faults[:5]
