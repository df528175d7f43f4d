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

from seatide.config.pasted_values import UNQUOTED, Place, arrives_as, pasted, places

VARIABLE = re.compile(r"\$\{(?!\?)([A-Za-z_][A-Za-z0-9_.\-]*)(?::([^}]*))?\}")
SINK_PLACEHOLDERS = frozenset({"database_name", "schema_name", "table_name", "schema_full_name", "table_full_name",
                               "primary_key", "unique_key", "field_names"})


# What a value ends beside: an empty one there is written "", elsewhere it is nothing (joined to its neighbour).
_APART = frozenset(("", " ", "\t", "\n", "\r", "=", ":", "{", "}", "[", "]", ",", "#", "+", "."))


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
    at, length, triple_at, last = 0, 0, -1, ""      # triple_at: where a fill joined to a \"\"\" string closed it again
    for match in VARIABLE.finditer(text, 0, text.rfind("}") + 1):     # none ends after the last } (review L1)
        name, default = match.group(1), match.group(2)
        place, back, ahead = None, 0, 0
        if name in variables:
            place = where.get(match.start())
            if as_given and place is None:      # in a comment: not filled in (a new line in it would end it)
                continue
            value = variables[name]
            if as_given:
                before = text[at:match.start()][-1:] or last       # the filled text's last character
                after_triple = place.after_triple or (length == triple_at and at == match.start())
                value, back, ahead = _joined(value, place, before, text[match.end():match.end() + 3], after_triple)
        elif name in SINK_PLACEHOLDERS or default is None:
            # A sink placeholder's default (${table_name:orders}) is the sink's to use, per table (plan.catalog).
            continue
        else:       # a default: part of the text, pasted as written under either rule
            value = default
        between = text[at:match.start()]
        if back and not between:        # the quote taken back is the previous fill's closing one
            parts[-1] = parts[-1][:-back]
            replaced[-1] = replaced[-1]._replace(end=replaced[-1].end - back, delta=replaced[-1].delta - back)
            length -= back
        written = match.start() - (back if between else 0)
        parts.append(text[at:written])
        start = length + written - at
        parts.append(value)
        length, last = start + len(value), (value or parts[-2] or last)[-1:]
        replaced.append(Filled(start, length, name, written, len(value) - (match.end() + ahead - written)))
        if place is not None and place.string:
            strings.setdefault(place.string, []).append(replaced[-1])
        # Joined to a \"\"\" string, a value must not close it early (its quotes at the end are content), nor
        # may a quote follow: it would join the closing quotes.
        tail = "".join(parts[-3:-1])[-3:]       # the \"\"\" string's content before the value
        if back == 3 and _closes(tail, value, text[match.end():match.end() + 5], ahead):
            raise Unfillable(replaced[-1], "triple")
        triple_at = length if back == 3 and not ahead else triple_at
        at = match.end() + ahead
    parts.append(text[at:])
    filled = "".join(parts)
    for (start, end), fills in strings.items():     # a value that closes its \"\"\" string early changes the text
        first, last = fills[0], fills[-1]       # each fill shifts what follows it by its delta
        # quotes at the string's end are its content, the last three closing it (``\"\"\"a\"\"\"\"`` is ``a"``)
        content = filled[start + first.start - first.written:end + last.start - last.written + last.delta]
        if '"""' in content.rstrip('"'):
            blamed = next((fill for fill in fills if '"' in filled[fill.start:fill.end]), first)
            raise Unfillable(blamed, "triple")
    return filled, replaced


def _joined(value: str, place: Place, before: str, after: str, after_triple: bool) -> tuple[str, int, int]:
    """(``value`` as written where ``place`` stands, how many characters before it and after it that writing takes
    the place of). ``before``: the character before it, ``after``: the text's next three.

    A value written as a quoted string right after a closing quote would make \"\"\" of the two (``""${x}``, the
    FAQ's ``'"${city}"'`` with an empty city): it joins the string before it instead (that string's closing quote
    taken back, the escaped content and a closing quote written), which means the same, adjacent quoted strings
    concatenating with nothing between. After a \"\"\" string it joins that string's content, raw, if it can stand
    there (else ``Unfillable``). An empty value next to a quote is nothing, as it was before; between two quoted
    strings (``""${x}""``) it joins them."""
    written = pasted(value, place.where)
    if place.where != UNQUOTED or not written.startswith('"'):
        return written, 0, 0
    content = arrives_as(value)
    if after_triple:        # between two \"\"\" strings it joins both: ``\"\"\"a\"\"\"${x}\"\"\"b\"\"\"``
        return (content, 3, 3) if after == '\"\"\"' else (content + '\"\"\"', 3, 0)
    if not content and before == '"' and after[:1] == '"' and after != '\"\"\"':
        return "", 1, 1
    if before == '"':
        return written[1:], 1, 0
    if not content and (before not in _APART or after[:1] not in _APART) and "//" not in before + after[:2]:
        return "", 0, 0     # joined to what stands beside it: nothing, as before (that makes no comment's //)
    return written, 0, 0


def at_fault(replaced: list[Filled], extent: tuple[int, int]) -> Filled | None:
    """The fill standing at a parse fault (``extent`` in the filled text): the one the fault starts in, else one it
    overlaps, a fill that wrote something before one that wrote nothing (an empty prefix is no culprit)."""
    start, end = extent[0], max(extent[1], extent[0] + 1)
    overlapping = [fill for fill in replaced if fill.start < end and start < fill.end or fill.start == start]
    return next((fill for fill in overlapping if fill.start <= start < fill.end),
                next((fill for fill in overlapping if fill.end > fill.start), overlapping[0] if overlapping else None))


_QUOTED_PIECE = re.compile(r"'[^'\n]*'")


def unquoted(reason: str, values: list[str]) -> str:
    """A parse error's ``reason`` with every quoted piece of it that holds a value's text left out (values are often
    passwords); if a value's text is still in it after that, only that the text does not parse there."""
    def piece(found: re.Match) -> str:
        inner = found.group(0)[1:-1]
        held = any(inner and (inner in value or value in inner or _shares(inner, value)) for value in values if value)
        return "(text from the value)" if held else found.group(0)

    told = _QUOTED_PIECE.sub(piece, reason)
    return "the text does not parse there" if any(_shares(told, value) for value in values) else told


def _shares(text: str, value: str) -> bool:
    """Whether ``text`` holds three characters of ``value`` in a row (a shorter value: only a quoted piece is left
    out, its letters are in any message)."""
    return any(value[i:i + 3] in text for i in range(len(value) - 2)) if value.strip() else False


def _closes(tail: str, value: str, after: str, ahead: int) -> bool:
    """Whether a value joined to a \"\"\" string (``tail``: its text before the value) would close it early: its
    quotes at the string's end are text, but a quote after the string would join its closing ones. Joined to a
    second \"\"\" string too (``ahead``), the value's text runs into that one's (``after[3:]``)."""
    if ahead:
        return '\"\"\"' in tail + value + after[3:5]
    return '\"\"\"' in (tail + value[:-3]).rstrip('"') or after[:1] == '"'
