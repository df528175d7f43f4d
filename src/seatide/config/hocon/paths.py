"""Path expressions: ``a.b."c.d"`` -> ("a", "b", "c.d"), for keys and substitutions."""

from __future__ import annotations

from typing import Sequence

from seatide.config.hocon.values import HoconError

_PATH_KINDS = frozenset({"str", "num", "bool", "null", "ws"})


def path_of(tokens: Sequence, what: str = "key") -> tuple[str, ...]:
    """Dots split unquoted text (numbers included: ``1.5`` is two keys); quoted text is one
    piece; whitespace between pieces belongs to the key (``a b = 1`` sets "a b")."""
    tokens = list(tokens)
    while tokens and tokens[0].kind == "ws":
        tokens.pop(0)
    while tokens and tokens[-1].kind == "ws":
        tokens.pop()
    if not tokens:
        raise HoconError(f"a {what} is empty")
    whole = (tokens[0].start, tokens[-1].end)      # the errors below quote the whole path
    keys: list[str] = []
    current: list[str] = []
    started = False              # the current key has a piece, even an empty quoted one
    for token in tokens:
        if token.kind not in _PATH_KINDS:
            raise HoconError(f"'{token.text}' cannot be part of a {what}", token.line, token.col,
                             extent=(token.start, token.end))
        if token.quoted:
            current.append(token.value)
            started = True
            continue
        pieces = token.text.split(".")
        for i, piece in enumerate(pieces):
            if i:                # a dot ends the key so far
                if not started and not current:
                    raise HoconError(f"'{_text(tokens)}' has an empty key between dots; quote a key that "
                                     "holds a dot", token.line, token.col, extent=whole)
                keys.append("".join(current))
                current, started = [], False
            if piece:
                current.append(piece)
                started = True
    if not started and not current:
        raise HoconError(f"'{_text(tokens)}' ends with a dot", tokens[-1].line, tokens[-1].col, extent=whole)
    keys.append("".join(current))
    return tuple(keys)


def _text(tokens) -> str:
    return "".join(('"' + t.value + '"') if t.quoted else t.text for t in tokens)
