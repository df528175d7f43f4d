"""HOCON text -> tokens, as Typesafe Config (SeaTunnel's reader) splits it.

Whitespace is kept as a token: inside a value concatenation (``foo bar``, ``"a" b``) the
spaces between two values are part of the value. Comments are dropped; the newline that
ends them is kept, since a newline separates fields as a comma does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from seatide.config.hocon.values import HoconError, number

# Characters an unquoted string may not hold (HOCON spec, "Unquoted strings").
FORBIDDEN = frozenset('$"{}[]:=,+#`^?!@*&\\')
_DIGITS = frozenset("0123456789")
_NUMBER_CHARS = frozenset("0123456789eE+-.")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
PUNCTUATION = {"{", "}", "[", "]", ",", ":", "="}


@dataclass(frozen=True)
class Token:
    """``kind``: "str", "num", "bool", "null", "subst", "ws", "nl", "eof" or the punctuation
    itself ("{", "+=", ...). ``value`` is the decoded value (a ``Subst`` for "subst");
    ``text`` is how it reads inside a concatenation."""

    kind: str
    value: Any
    text: str
    line: int
    col: int
    quoted: bool | str = False   # True, or '"""' for a triple-quoted string
    start: int = -1          # offsets of the token in the text (a quoted one with its quotes)
    end: int = -1


@dataclass(frozen=True)
class Subst:
    """``${path}`` or ``${?path}``, the path already split into its keys."""

    path: tuple[str, ...]
    optional: bool

    def __str__(self) -> str:
        return "${" + ("?" if self.optional else "") + ".".join(self.path) + "}"


def is_space(ch: str) -> bool:
    # Java's whitespace plus the no-break spaces and BOM Typesafe Config also skips.
    return ch != "\n" and (ch.isspace() or ch in "\ufeff\u00a0\u2007\u202f")


def tokenize(text: str) -> list[Token]:
    return _Lexer(text).run()


class _Lexer:
    def __init__(self, text: str):
        self.text, self.i, self.line, self.line_start = text, 0, 1, 0
        if text.startswith("\ufeff"):
            # A BOM is skipped, not cut off: offsets (a Span, an error's extent) stay those of
            # the text as given, so a reader that rewrites a value in place hits the value.
            self.i = self.line_start = 1
        self.out: list[Token] = []

    def error(self, message: str, at: int | None = None, extent: tuple[int, int] | None = None) -> HoconError:
        """The error at offset ``at`` (the column it names); ``extent``, the text at fault, is
        that one character unless said: exactly the fault, so a reader that filled variables in
        blames a filled value only when the fault is in it."""
        at = self.i if at is None else at
        return HoconError(message, self.line, at - self.line_start + 1, extent=extent or (at, at + 1))

    def emit(self, kind: str, value: Any, text: str, start: int, quoted: bool | str = False,
             end: int | None = None) -> None:
        self.out.append(Token(kind, value, text, self.line, start - self.line_start + 1, quoted, start,
                              self.i if end is None else end))

    def run(self) -> list[Token]:
        text, n = self.text, len(self.text)
        while self.i < n:
            ch, start = text[self.i], self.i
            if ch == "\n":
                self.emit("nl", "\n", "\n", start)
                self.i += 1
                self.line, self.line_start = self.line + 1, self.i
            elif is_space(ch):
                while self.i < n and is_space(text[self.i]):
                    self.i += 1
                self.emit("ws", text[start:self.i], text[start:self.i], start)
            elif ch == "#" or text.startswith("//", self.i):
                end = text.find("\n", self.i)
                self.i = n if end < 0 else end
            elif text.startswith('"""', self.i):
                self.triple_quoted()
            elif ch == '"':
                value = self.quoted()
                self.emit("str", value, value, start, quoted=True)
            elif text.startswith("+=", self.i):
                self.i += 2
                self.emit("+=", "+=", "+=", start)
            elif ch in PUNCTUATION:
                self.i += 1
                self.emit(ch, ch, ch, start)
            elif ch == "$":
                self.substitution()
            elif ch == "-" or ch in _DIGITS:      # ASCII only: str.isdigit() takes "²" too, which no number
                self.number_or_text()               # char consumes, so the lexer never moved on (a REST DoS)
            elif ch in FORBIDDEN:
                raise self.error(f"'{ch}' is not allowed outside quotes; put the value in double quotes")
            else:
                self.unquoted()
        self.emit("eof", None, "", self.i)
        return self.out

    def quoted(self) -> str:
        text, n = self.text, len(self.text)
        opening = self.i
        self.i += 1
        parts: list[str] = []
        while True:
            if self.i >= n:
                raise self.error("a quoted string is not closed: add the closing \"", extent=(opening, n))
            ch = text[self.i]
            if ch == '"':
                self.i += 1
                return "".join(parts)
            if ch == "\n":      # the string up to the line's end is at fault, not what follows
                raise self.error("a quoted string may not span lines: write \\n, or use \"\"\"triple quotes\"\"\"",
                                 extent=(opening, self.i))
            if ch == "\\":
                code = text[self.i + 1:self.i + 2]
                if code == "u":
                    parts.append(self.unicode_escape())
                    continue
                if code not in _ESCAPES:
                    raise self.error(f"\\{code} is not an escape in a quoted string (JSON escapes: "
                                     "\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX); write \\\\ for a backslash",
                                     extent=(self.i, self.i + 2))
                parts.append(_ESCAPES[code])
                self.i += 2
                continue
            parts.append(ch)
            self.i += 1

    def unicode_escape(self) -> str:
        """``\\uXXXX`` at ``self.i``; a UTF-16 pair written as two escapes (``\\ud83d\\ude00``)
        is one character, as in Java's strings."""
        start = self.i
        unit = self._hex_unit(start)
        if 0xD800 <= unit <= 0xDBFF and self.text.startswith("\\u", self.i):
            low = self._hex_unit(self.i)
            if 0xDC00 <= low <= 0xDFFF:
                return chr(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
        if 0xD800 <= unit <= 0xDFFF:
            raise self.error(f"\\u{unit:04x} is half of a UTF-16 pair, without its other half", start,
                             (start, self.i))
        return chr(unit)

    def _hex_unit(self, at: int) -> int:
        digits = self.text[at + 2:at + 6]
        if len(digits) < 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
            raise self.error("\\u must be followed by four hex digits, e.g. \\u00e9", at, (at, at + 6))
        self.i = at + 6
        return int(digits, 16)

    def triple_quoted(self) -> None:
        start, text = self.i, self.text
        end = text.find('"""', self.i + 3)
        if end < 0:
            raise self.error('a """triple-quoted""" string is not closed', extent=(start, len(text)))
        while text.startswith('"', end + 3):     # quotes just before the closing ones belong to the string
            end += 1
        value = text[self.i + 3:end]
        self.emit("str", value, value, start, quoted='"""', end=end + 3)
        newlines = value.count("\n")
        if newlines:
            self.line += newlines
            self.line_start = start + 3 + value.rfind("\n") + 1
        self.i = end + 3

    def substitution(self) -> None:
        start, text = self.i, self.text
        if not text.startswith("${", self.i):
            raise self.error("'$' must start a substitution ${...}; put the value in double quotes")
        self.i += 2
        optional = text.startswith("?", self.i)
        self.i += optional
        inner: list[Token] = []
        lexer = _Lexer(text)
        lexer.i, lexer.line, lexer.line_start, lexer.out = self.i, self.line, self.line_start, inner
        while True:
            if lexer.i >= len(text) or text[lexer.i] == "\n":
                raise self.error("a substitution ${...} is not closed on its line", start, (start, lexer.i))
            ch = text[lexer.i]
            if ch == "}":
                break
            if ch == '"':
                at = lexer.i
                value = lexer.quoted()
                lexer.emit("str", value, value, at, quoted=True)
            elif is_space(ch):
                at = lexer.i
                while is_space(text[lexer.i]):
                    lexer.i += 1
                lexer.emit("ws", text[at:lexer.i], text[at:lexer.i], at)
            elif ch in FORBIDDEN:
                raise self.error(f"'{ch}' is not allowed in a substitution's path", lexer.i)
            elif text.startswith("//", lexer.i):     # unquoted() reads nothing there: it looped forever
                raise self.error("'//' is not allowed in a substitution's path; quote that part: ${a.\"//b\"}",
                                 lexer.i)
            else:
                lexer.unquoted(number_chars=False)
        self.i = lexer.i + 1
        from seatide.config.hocon.paths import path_of

        path = path_of(inner, what="substitution")
        raw = text[start:self.i]
        self.emit("subst", Subst(path, optional), raw, start)

    def number_or_text(self) -> None:
        start, text, n = self.i, self.text, len(self.text)
        while self.i < n and text[self.i] in _NUMBER_CHARS:
            self.i += 1
        raw = text[start:self.i]
        value = number(raw)
        if value is not None:
            self.emit("num", value, raw, start)
        elif "+" in raw:
            raise self.error("'+' is not allowed outside quotes; put the value in double quotes", start,
                             (start, self.i))
        else:                  # "1.2.3", "1e", "-": text, as in Typesafe Config
            self.emit("str", raw, raw, start)

    def unquoted(self, number_chars: bool = True) -> None:
        start, text, n = self.i, self.text, len(self.text)
        while self.i < n:
            ch = text[self.i]
            if ch in FORBIDDEN or ch == "\n" or is_space(ch) or text.startswith("//", self.i):
                break
            self.i += 1
        raw = text[start:self.i]
        if raw == "true" or raw == "false":
            self.emit("bool", raw == "true", raw, start)
        elif raw == "null":
            self.emit("null", None, raw, start)
        else:
            self.emit("str", raw, raw, start)
