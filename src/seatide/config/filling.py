"""Filling a job's ``${name}`` / ``${name:default}`` into its text, by the rule the job's row was stored under.

Two rules, told apart by a mark in the stored variables (``config.job_environment.AS_GIVEN``):

* raw: every value pasted into the text as written and read as HOCON, as SeaTide always did. A row stored without
  the mark (before it existed) is read so, exactly as it was: a driver restarted, a job resumed from its
  checkpoint, its outline or its events read the same tables, paths and passwords as before (outside review H2);
* as given (a row marked: a submit, a resume with new variables): the user's values (``-i``, a REST request's
  ``variables``) are written where their ``${name}`` stands so that each arrives as given
  (``config.pasted_values``).

A default (``${name:default}``) is pasted raw under both rules: it is part of the text, which means what it meant
(outside review H3).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from seatide.config.pasted_values import pasted, places

VARIABLE = re.compile(r"\$\{(?!\?)([A-Za-z_][A-Za-z0-9_.\-]*)(?::([^}]*))?\}")
SINK_PLACEHOLDERS = frozenset({"database_name", "schema_name", "table_name", "schema_full_name", "table_full_name",
                               "primary_key", "unique_key", "field_names"})


class Filled(NamedTuple):
    """Where a variable's value was filled in: ``filled[start:end]`` in the filled text, for the
    ``${...}`` written at ``written`` (an offset in the text as written), ``delta`` longer than it."""

    start: int
    end: int
    name: str
    written: int
    delta: int

    def placeholder(self, text: str) -> str:
        """The ``${...}`` it replaced, in the text as written."""
        return text[self.written:self.written + self.end - self.start - self.delta]


class Unfillable(ValueError):
    """A user's value that cannot be written where its ``${name}`` stands (``why``); ``fill`` is at ``written``."""

    def __init__(self, fill: Filled, why: str):
        super().__init__(why)
        self.fill, self.why = fill, why


def fill(text: str, variables: dict[str, str], as_given: bool) -> tuple[str, list[Filled]]:
    """The text with ``variables`` (the user's) and the defaults filled in, and where; ``Unfillable`` for a value
    a \"\"\" string cannot hold. A name neither given nor defaulted is left for HOCON (a path, the environment)."""
    where = {place.match.start(): place for place in places(text, VARIABLE)} if as_given and variables else {}
    parts: list[str] = []
    replaced: list[Filled] = []
    strings: dict[tuple[int, int], list[Filled]] = {}       # the fills of each \"\"\" string
    at, length = 0, 0
    for match in VARIABLE.finditer(text):
        name, default = match.group(1), match.group(2)
        if name in variables:
            place = where.get(match.start())
            if as_given and place is None:      # in a comment: not filled in (a new line in it would end it)
                continue
            value = pasted(variables[name], place.where) if as_given else variables[name]
        elif name in SINK_PLACEHOLDERS or default is None:
            # A sink placeholder's default (${table_name:orders}) is the sink's to use, per table (plan.catalog).
            continue
        else:       # a default: part of the text, pasted as written under either rule
            place, value = None, default
        parts.append(text[at:match.start()])
        start = length + match.start() - at
        parts.append(value)
        length = start + len(value)
        replaced.append(Filled(start, length, name, match.start(), len(value) - (match.end() - match.start())))
        if place is not None and place.string:
            strings.setdefault(place.string, []).append(replaced[-1])
        at = match.end()
    parts.append(text[at:])
    filled = "".join(parts)
    for (start, end), fills in strings.items():     # a value that closes its \"\"\" string early changes the text
        first, last = fills[0], fills[-1]       # each fill shifts what follows it by its delta
        if '"""' in filled[start + first.start - first.written:end + last.start - last.written + last.delta]:
            blamed = next((fill for fill in fills if '"' in filled[fill.start:fill.end]), first)
            raise Unfillable(blamed, "triple")
    return filled, replaced
