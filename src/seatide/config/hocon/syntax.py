"""Tokens -> the document's structure, positions kept, nothing merged or resolved yet.

A value is a concatenation (``Concat``) of parts: simple values, whitespace, substitutions,
objects and arrays. ``a = foo bar`` is one value of three parts, as in Typesafe Config;
``seatide.config.hocon.resolve`` turns parts into one value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from seatide.config.hocon.lexer import Token, tokenize
from seatide.config.hocon.paths import path_of
from seatide.config.hocon.values import MAX_NESTING, HoconError, too_deep

_SIMPLE = frozenset({"str", "num", "bool", "null"})


@dataclass
class Field:
    path: tuple[str, ...]
    append: bool                 # ``+=``
    value: "Concat"
    line: int
    col: int


@dataclass
class Obj:
    fields: list[Field]
    line: int
    start: int = -1         # offsets of its braces in the text, for errors about a value holding it
    end: int = -1


@dataclass
class Arr:
    items: list["Concat"]
    line: int
    start: int = -1
    end: int = -1


# A simple value or whitespace is its Token; a substitution is a Token of kind "subst".
Part = Union[Token, Obj, Arr]


@dataclass
class Concat:
    parts: list[Part] = field(default_factory=list)
    line: int = 0


def parse_document(text: str) -> Union[Obj, Arr]:
    return _Parser(tokenize(text)).document()


class _Parser:
    def __init__(self, tokens: list[Token]):
        self.tokens, self.i = tokens, 0
        self.depth = -1          # objects and lists open around the current token, the document's own not counted

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def error(self, message: str, token: Token | None = None) -> HoconError:
        token = token or self.tok
        return HoconError(message, token.line, token.col, extent=(token.start, token.end))

    def nest(self, levels: int, token: Token) -> None:
        """``levels`` more objects or lists open at ``token``: refused past ``MAX_NESTING``, before
        the parser's recursion (a level per level) can run out of stack."""
        self.depth += levels
        if too_deep(self.depth):
            raise self.error(f"objects and lists nest more than {MAX_NESTING} levels deep here (a key "
                             f"a.b.c counts a level per dot); a job needs a few levels: write the value "
                             f"flatter, or look for brackets opened and never closed", token)

    def skip(self, *kinds: str) -> None:
        while self.tok.kind in kinds:
            self.i += 1

    def document(self) -> Union[Obj, Arr]:
        self.skip("ws", "nl")
        if self.tok.kind == "[":
            value = self.array()
        elif self.tok.kind == "{":
            start = self.tok
            self.i += 1
            value = self.object_body("}", start)
            self.i += 1
        else:
            value = self.object_body("eof", self.tok)
        self.skip("ws", "nl")
        if self.tok.kind != "eof":
            raise self.error(f"expected the end of the file after the closing bracket, found '{self.tok.text}'")
        return value

    def object_body(self, closing: str, start: Token) -> Obj:
        """Fields up to ``closing`` (left unconsumed); a comma or a newline ends each field."""
        fields: list[Field] = []
        self.nest(1, start)
        while True:
            self.skip("ws", "nl")
            if self.tok.kind == closing:
                self.depth -= 1
                return Obj(fields, start.line, start.start, self.tok.end)
            if self.tok.kind == "eof":
                raise self.error("an object is not closed: add the missing '}'", start)
            if self.tok.kind == ",":
                raise self.error("expected a key, found ','; remove the comma")
            fields.append(self.field())
            if not self.separator(closing):
                closer = "end of the file" if closing == "eof" else "'}'"
                raise self.error(f"expected a comma, a new line or the {closer} after a value, found "
                                 f"'{self.tok.text}'; if it is part of the value, put the value in double quotes")

    def separator(self, closing: str) -> bool:
        """Consume what may end a field or an element: newlines and at most one comma."""
        self.skip("ws")
        seen, commas = False, 0
        while self.tok.kind in ("nl", ","):
            if self.tok.kind == ",":
                commas += 1
                if commas > 1:
                    raise self.error("two commas in a row: remove one")
            seen = True
            self.i += 1
            self.skip("ws")
        return seen or self.tok.kind == closing

    def field(self) -> Field:
        start = self.tok
        key: list[Token] = []
        while self.tok.kind in _SIMPLE or self.tok.kind == "ws":
            key.append(self.tok)
            self.i += 1
        if self.tok.kind == "subst":
            raise self.error("a key cannot hold a substitution ${...}")
        words = [t for t in key if t.kind != "ws"]
        if words and words[0].kind == "str" and not words[0].quoted and words[0].value == "include" \
                and (len(words) == 1 or words[1].quoted):
            raise self.error("'include' is not supported in a job file: put the included settings in "
                             "the file, or pass values with -i name=value", start)
        if not words:
            raise self.error(f"expected a key, found '{self.tok.text or 'the end of the file'}'")
        try:
            path = path_of(key)
        except HoconError as exc:
            raise HoconError(exc.reason, exc.line or start.line, exc.col or start.col,
                             extent=exc.extent or (key[0].start, key[-1].end)) from None
        after_key = self.i
        self.skip("nl", "ws")      # the separator or the object may start on the next line
        if self.tok.kind not in (":", "=", "+=", "{"):
            self.i = after_key
        kind = self.tok.kind
        if kind in (":", "=", "+="):
            self.i += 1
        elif kind != "{":
            found = "a new line" if kind == "nl" else "the end of the file" if kind == "eof" else f"'{self.tok.text}'"
            raise HoconError(f"expected '=', ':' or '{{' after the key '{'.'.join(path)}', found {found}",
                             self.tok.line, self.tok.col, extent=(key[0].start, self.tok.end))   # it quotes both
        self.skip("ws", "nl")
        self.nest(len(path) - 1, start)        # a.b.c = x is a { b { c = x } }
        value = self.concat()
        self.depth -= len(path) - 1
        return Field(path, kind == "+=", value, start.line, start.col)

    def concat(self) -> Concat:
        start = self.tok
        parts: list[Part] = []
        while True:
            kind = self.tok.kind
            if kind in _SIMPLE or kind in ("ws", "subst"):
                parts.append(self.tok)
                self.i += 1
            elif kind == "{":
                brace = self.tok
                self.i += 1
                parts.append(self.object_body("}", brace))
                self.i += 1
            elif kind == "[":
                parts.append(self.array())
            else:
                break
        while parts and isinstance(parts[-1], Token) and parts[-1].kind == "ws":
            parts.pop()
        if not parts:
            found = "the end of the file" if start.kind == "eof" else f"'{start.text}'"
            raise self.error(f"expected a value, found {found}", start)
        return Concat(parts, start.line)

    def array(self) -> Arr:
        start = self.tok
        self.i += 1
        items: list[Concat] = []
        self.nest(1, start)
        while True:
            self.skip("ws", "nl")
            if self.tok.kind == "]":
                self.i += 1
                self.depth -= 1
                return Arr(items, start.line, start.start, self.tokens[self.i - 1].end)
            if self.tok.kind == "eof":
                raise self.error("a list is not closed: add the missing ']'", start)
            if self.tok.kind == ",":
                raise self.error("expected a list element, found ','; remove the extra comma")
            items.append(self.concat())
            if not self.separator("]"):
                raise self.error(f"expected a comma, a new line or ']' after a list element, found "
                                 f"'{self.tok.text}'; if it is part of the value, put it in double quotes")
