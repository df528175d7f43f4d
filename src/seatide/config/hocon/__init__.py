"""A HOCON reader that gives what Typesafe Config (SeaTunnel's reader) gives.

``parse`` returns plain Python values: dicts (in file order), lists, strings, ``None``,
booleans, and numbers that remember their text (``values.HoconInt``/``HoconFloat``, so a
string option written ``007`` stays ``007``). Durations and sizes stay text (``10 s``), as
Typesafe Config keeps them until a getter asks. ``include`` is refused: a job is one text.

Why not pyhocon: it drops ``""`` from lists, leaves ``\\uXXXX`` undecoded, turns ``true``
into ``True`` inside a concatenation, reads ``10 seconds`` as a timedelta and ``007`` as 7,
and accepts unquoted ``:`` where Typesafe Config refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Mapping

from seatide.config.hocon.resolve import (BLOCK_MARK, UNDEFINED, Block, Builder, Pending, RawObj, Resolver, Span,
                                          block_key)
from seatide.config.hocon.syntax import Arr, Concat, parse_document
from seatide.config.hocon.values import MAX_NESTING, HoconError, HoconFloat, HoconInt


@dataclass(frozen=True)
class Document:
    """A parsed HOCON text.

    ``lines`` maps the path of every key to its line (kept-apart keys under their
    ``block_key``, a list's element as ``"[i]"``: ``("a", "[0]", "b")``); ``blocks`` lists
    the kept-apart fields in file order."""

    value: Any
    lines: Mapping[tuple[str, ...], int]
    blocks: tuple[Block, ...]
    spans: Mapping[tuple[str, ...], list[Span]] = None      # values written as text (``Span``)


def parse(text: str, apart: Collection[str] = (), environ: Mapping[str, str] | None = None) -> Document:
    """Parse and resolve ``text``; ``HoconError`` says what is wrong and where.

    Fields directly inside the top-level keys named in ``apart`` are kept apart from their
    namesakes (``resolve.Builder``). Substitutions not defined in the text are read from
    ``environ``, as Typesafe Config reads the process environment; by default there is none, so
    a text is never read with a process's environment unless its caller means it (a job's:
    ``config.job_environment``)."""
    node = parse_document(text)
    builder = Builder(apart)
    if isinstance(node, Arr):      # a document may be a list; a job file never is
        value = Resolver(RawObj(), environ).value(Pending(Concat([node], node.line), None))
        return Document(value, {}, (), {})
    root = builder.object(node, ())
    value = Resolver(root, environ, builder.lines).value(root)
    return Document(value, builder.lines, tuple(builder.blocks), builder.spans)


__all__ = ["BLOCK_MARK", "MAX_NESTING", "UNDEFINED", "Block", "Document", "HoconError", "HoconFloat", "HoconInt",
           "Span", "block_key", "parse"]
