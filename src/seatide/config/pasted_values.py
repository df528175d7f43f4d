"""A variable's value written into a job's text where its ``${name}`` stands, so that it arrives as given.

``job_text`` fills ``${name}`` (``-i name=value``, a REST submit's ``variables``, a ``${name:default}``) into the
text before HOCON reads it. Pasted as it is, a value was read as HOCON: ``-i pw='ab#x'`` made ``password = ab``
and a comment, a ``"`` or a ``\\`` broke or changed the string it stood in, ``${HOME}`` was looked up. Where the
placeholder stands decides how the value is written (``Place``):

* unquoted (a whole value, part of an unquoted concatenation ``/data/${dir}/x``, a list's element, a key): a value
  that reads back as itself, alone, is pasted as it is: a number, ``true``/``false``/``null`` or a plain word
  (``2``, ``orders``, ``/data/in``) keeps the type the option reads today. A whole list or object
  (``['abc','d~f']``, ``{a = 1}``: SeaTunnel's ``-i``) and a whole quoted string (``"a,b"``) are read as HOCON, as
  SeaTunnel reads them. Anything else is written as a quoted string, escaped: it arrives as text, exactly;
* inside a ``"..."`` string: escaped, so it is that string's text, exactly;
* inside a ``\"\"\"...\"\"\"`` string: as it is (such a string has no escapes); a value that would close it
  there (``\"\"\"``, or quotes meeting the text's) cannot stand in one: ``job_text`` refuses it;
* in a comment: not filled in (the comment is dropped; a new line in the value would have ended it).

A whole quoted string (``"a,b"``) is its content wherever it stands: the way to give any text, quotes and all.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Iterator

from seatide.config.hocon import HoconError, parse
from seatide.config.hocon.lexer import tokenize

UNQUOTED, QUOTED, TRIPLE = "unquoted", "quoted", "triple"
_PLAIN_KINDS = frozenset({"str", "num", "bool", "null"})
_CLOSE = {"[": "]", "{": "}"}


@dataclass(frozen=True)
class Place:
    """A placeholder (``match`` of the variable pattern in the text as written) and where it stands; ``string``
    is the ``\"\"\"`` string's content (start, end offsets in the text as written) it stands in, if it does."""

    match: re.Match
    where: str
    string: tuple[int, int] | None = None
    after_triple: bool = False      # right after a """ string's closing quotes (``config.filling`` joins it)


def places(text: str, variable: re.Pattern) -> Iterator[Place]:
    """Every ``variable`` match in ``text``, in order, with where it stands. The text is read as the lexer reads
    it, quotes and comments only: a placeholder (its default too, ``${x:"a b"}``) is passed over whole."""
    normal = _Bounded(r'"""|"|#|//', variable, text)
    quoted = _Bounded(r'\\.|"|\n', variable, text)
    triple = _Bounded(r'"""', variable, text)
    at, n, closed = 0, len(text), -1
    while at < n:
        found = normal.search(at)
        if found is None:
            return
        token = found.group(0)
        if token.startswith("${"):
            yield Place(found, UNQUOTED, after_triple=found.start() == closed)
            at = found.end()
        elif token in ("#", "//"):
            end = text.find("\n", found.end())
            at = n if end < 0 else end
        elif token == '"""':
            at = closed = yield from _in_triple(text, found.end(), triple)
        else:
            at = found.end()
            while (inside := quoted.search(at)) is not None:
                at = inside.end()
                if inside.group(0).startswith("${"):
                    yield Place(inside, QUOTED)
                elif inside.group(0) in ('"', "\n"):        # closed, or left unclosed: the lexer says so
                    break
            else:
                return


class _Bounded:
    """``tokens`` or a placeholder (``variable``), whichever comes first from an offset of ``text``. A placeholder is
    matched only up to the text's last ``}``, where any must end: a ``${a:`` with no ``}`` after it fails at once,
    where a search of one pattern holding both scanned to the end for each (8,000 lines: 15 s, outside review L1)."""

    def __init__(self, tokens: str, variable: re.Pattern, text: str):
        self.pattern = re.compile(tokens + r"|\$\{", re.DOTALL)
        self.variable, self.text, self.bound = variable, text, text.rfind("}") + 1

    def search(self, at: int) -> re.Match | None:
        while (found := self.pattern.search(self.text, at)) is not None and found.group(0) == "${":
            placeholder = self.variable.match(self.text, found.start(), self.bound)
            if placeholder is not None:
                return placeholder
            at = found.start() + 1
        return found


def _in_triple(text: str, start: int, triple: _Bounded) -> Iterator[Place]:
    """The placeholders of the ``\"\"\"`` string whose content starts at ``start``; returns where it ends."""
    at, inside = start, []
    while (found := triple.search(at)) is not None and found.group(0) != '"""':
        inside.append(found)
        at = found.end()
    end = len(text) if found is None else found.start()
    while text.startswith('"', end + 3):       # quotes just before the closing ones belong to the string
        end += 1
    for match in inside:
        yield Place(match, TRIPLE, (start, end))
    return min(len(text), end + 3)


@functools.lru_cache(maxsize=1024)
def pasted(value: str, where: str) -> str:
    """``value`` as written where a placeholder stands (``where``); one value fills many placeholders."""
    content = string_content(value)
    if where == QUOTED:
        return quoted(value if content is None else content)[1:-1]
    if where == TRIPLE:
        return value if content is None else content
    if content is not None:
        return quoted(content)
    if _structure(value.strip()):       # a list or object, spaces around it too (outside review L4)
        return value.strip()
    return value if _reads_as_itself(value) else quoted(value)


def arrives_as(value: str) -> str:
    """The text a value arrives as (a whole quoted string is its content): what a secret's masker also looks for."""
    content = string_content(value)
    return value if content is None else content


def quoted(text: str) -> str:
    """``text`` as a HOCON quoted string (JSON's escapes, which HOCON's are)."""
    return json.dumps(text, ensure_ascii=False)


def string_content(value: str) -> str | None:
    """The content of a value that is one whole HOCON quoted string (``"a,b"``, ``\"\"\"x\"\"\"``), else None."""
    if not value.startswith('"'):
        return None
    tokens = _tokens(value)
    if tokens is None or len(tokens) != 2 or tokens[0].kind != "str" or not tokens[0].quoted:
        return None
    return tokens[0].value if (tokens[0].start, tokens[0].end) == (0, len(value)) else None


def _tokens(value: str):
    try:
        return tokenize(value)
    except HoconError:
        return None


def _reads_as_itself(value: str) -> bool:
    """One unquoted token, all of the value, that no neighbour can change: a leading or trailing ``/`` could meet
    the text's to start a comment (``/base/${sub}``), ``include`` is a keyword where a key stands."""
    if value.startswith("/") or value.endswith("/") or value == "include":
        return False
    tokens = _tokens(value)
    if tokens is None or len(tokens) != 2:
        return False
    token = tokens[0]
    return token.kind in _PLAIN_KINDS and not token.quoted and (token.start, token.end) == (0, len(value))


def _structure(value: str) -> bool:
    """A whole list or object: it opens at the first character and closes at the last (no comment after it, no
    second one joined to it), holds no substitution (``${HOME}`` in a value is text) and parses alone."""
    if value[:1] not in _CLOSE or not value.endswith(_CLOSE[value[0]]):
        return False
    tokens = _tokens(value)
    if tokens is None or tokens[-2].end != len(value) or any(token.kind == "subst" for token in tokens):
        return False
    depth = 0
    for token in tokens[:-2]:
        depth += token.kind in _CLOSE
        depth -= token.kind in _CLOSE.values()
        if depth == 0:          # closed before the value's end: ``[a] [b]``
            return False
    try:
        return list(parse("v = " + value).value) == ["v"]
    except (HoconError, RecursionError):
        return False
