"""Values a HOCON file holds beyond plain Python ones: numbers that remember how they were
written, and the error every stage of the reader raises."""

from __future__ import annotations

_LONG = 1 << 63
# How deep objects and lists may nest, in the text or in a value substitutions build: a job
# needs a few levels; far more is a mistake or an attack, and the reader (recursive, as is
# whatever walks the tree after it) must refuse it with a message, never a RecursionError.
MAX_NESTING = 100


class HoconError(ValueError):
    """Text that is not HOCON, or a substitution that cannot be resolved.

    ``reason`` says what is wrong and how to fix it; ``line``/``col`` say where (None when
    the whole document is at fault). ``undefined`` names a substitution nothing defines.
    ``extent`` is the text at fault, ``(start, end)`` offsets, when known: a reader that filled
    values into the text (``job_text``) tells from it whether the fault is in a filled value."""

    def __init__(self, reason: str, line: int | None = None, col: int | None = None,
                 undefined: str | None = None, extent: tuple[int, int] | None = None):
        where = f" at line {line}, column {col}" if line and col else f" at line {line}" if line else ""
        super().__init__(reason + where)
        self.reason, self.line, self.col, self.undefined = reason, line, col, undefined
        self.extent = extent


class _AsWritten:
    """A number as written: ``str()`` is its text (``007`` stays ``007``, ``0.10`` stays ``0.10``),
    as Typesafe Config's ``getString`` gives it, so a string option written as a number keeps
    its digits. Arithmetic, comparison, JSON and ``repr`` see the plain number."""

    _plain: type

    def __new__(cls, value, text: str):
        self = cls._plain.__new__(cls, value)
        self.text = text
        return self

    def __str__(self) -> str:
        return self.text

    def __format__(self, spec: str) -> str:
        return self.text if not spec else self._plain(self).__format__(spec)

    def __reduce__(self):
        return (type(self), (self._plain(self), self.text))


class HoconInt(_AsWritten, int):
    """An integer as written (``007``)."""

    _plain = int


class HoconFloat(_AsWritten, float):
    """A decimal number as written (``0.10``, ``1e3``)."""

    _plain = float


def number(text: str) -> HoconInt | HoconFloat | None:
    """The number ``text`` spells in HOCON (JSON numbers, plus Java's ``5.`` and ``007``),
    or None: then it reads as text, as ``1.2.3`` does. An integer beyond 64 bits is text too,
    as in Typesafe Config."""
    if not text or text == "-":
        return None
    if any(c in text for c in ".eE"):
        try:
            value = float(text)
        except ValueError:
            return None
        return HoconFloat(value, text)
    try:
        value = int(text)
    except ValueError:
        return None
    if not -_LONG <= value < _LONG:
        return None
    return HoconInt(value, text)


def text_of(value) -> str:
    """How a simple value reads inside a string concatenation (``true``, not ``True``)."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    return str(value)


def too_deep(level: int) -> bool:
    """The one nesting rule, for the parser, the resolver and the shade alike: an object or list
    whose key path from the document's root has more than ``MAX_NESTING`` steps (``a { b {} }``: b's
    object is at level 2; the document's own object, at level 0, does not count)."""
    return level > MAX_NESTING


def nested_past(value) -> tuple | None:
    """The path (keys, list indexes) at which an object or list in the document ``value`` is
    ``too_deep``, or None. A walk, not a recursion: the value may be too deep to recurse."""
    todo = [(value, ())]
    while todo:
        value, path = todo.pop()
        if isinstance(value, (dict, list)):
            if too_deep(len(path)):
                return path
            items = value.items() if isinstance(value, dict) else enumerate(value)
            todo.extend((item, (*path, key)) for key, item in items if isinstance(item, (dict, list)))
    return None
