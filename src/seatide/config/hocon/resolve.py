"""The document's structure -> plain values: duplicate keys merged, substitutions resolved.

Rules (HOCON spec, checked against Typesafe Config 1.4):

* A later field replaces an earlier one, except that two objects merge, key by key.
* ``a.b.c = 1`` is ``a { b { c = 1 } }``.
* ``${path}`` is looked up in the whole document (a later definition counts), then in the
  environment the caller gives (none by default: which one a job reads is
  ``config.job_environment``'s to say); ``${?path}`` may be undefined: the field is then not set (an earlier value
  stays), a list element is dropped, and in a string it reads as nothing.
* ``${path}`` inside the value of ``path`` itself means its previous value, so
  ``a = ${a} [2]`` and ``a += 2`` append.
* Parts of one value concatenate: strings as text (``true``, numbers as written), lists
  into one list, objects merged; mixing an object or list with text is an error.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Collection, Mapping

from seatide.config.hocon.lexer import Subst, Token
from seatide.config.hocon.syntax import Arr, Concat, Field, Obj
from seatide.config.hocon.shape import MAX_ELEMENTS, Shapes
from seatide.config.hocon.values import MAX_NESTING, HoconError, too_deep

BLOCK_MARK = "__seatide_block_"


class _Undefined:
    def __repr__(self) -> str:
        return "<undefined>"


UNDEFINED: Any = _Undefined()
_MISSING: Any = object()
# Levels of ``Resolver._value`` one attempt may nest (a few Python frames each): far inside
# Python's 1000 wherever the reader is called from (``Resolver.value``).
_LEVELS = 50


def block_key(parent: str, index: int) -> str:
    """The key a kept-apart field is stored under (see ``Builder``)."""
    return f"{BLOCK_MARK}{parent}_{index}"


@dataclass(frozen=True)
class Span:
    """Where a value written as plain text sits: ``text[start:end]``, its quotes included
    (``quote`` is one double quote, three, or empty). Lets a reader rewrite one value in place, the rest
    of the text as written (``seatide.secrets`` masks passwords this way)."""

    start: int
    end: int
    quote: str


@dataclass(frozen=True)
class Block:
    """A field kept apart from its namesakes: ``source { FakeSource {} FakeSource {} }``."""

    parent: str
    index: int        # position among the fields kept apart under the same parent
    name: str         # the key as written
    line: int


class RawObj:
    """An object while fields are still arriving: key -> raw value."""

    def __init__(self) -> None:
        self.items: dict[str, Any] = {}


@dataclass(eq=False)
class Pending:
    """A value with substitutions (or not yet concatenated), resolved once the document is read.
    ``path`` is the field it was assigned to and ``prior`` that field's earlier raw value,
    which a self-reference (``${path}`` inside it) stands for."""

    concat: Concat
    path: tuple[str, ...] | None
    prior: Any = None
    site: tuple[str, ...] | None = None     # where its keys are, for lines ("a", "[0]" in a list)


@dataclass(eq=False)
class Merge:
    """A later value over an earlier one, resolved before deciding: objects merge, an
    undefined later value keeps the earlier one, anything else replaces it."""

    older: Any
    newer: Any


class Builder:
    """Assigns fields in file order into one tree of ``RawObj``, recording each key's line.

    Fields directly inside a top-level key listed in ``apart`` are not merged with their
    namesakes but kept under ``block_key(parent, n)``: a job may hold two ``Console {}``
    blocks (SeaTunnel's reader does the same)."""

    def __init__(self, apart: Collection[str] = (), lines: dict | None = None):
        self.apart = frozenset(apart)
        self.lines: dict[tuple[str, ...], int] = {} if lines is None else lines
        self.spans: dict[tuple[str, ...], list[Span]] = {}
        self.blocks: list[Block] = []
        self._counts: dict[str, int] = {}

    def object(self, node: Obj, base: tuple[str, ...] | None, target: RawObj | None = None) -> RawObj:
        target = target if target is not None else RawObj()
        for field in node.fields:
            self.assign(target, base, field)
        return target

    def assign(self, target: RawObj, base: tuple[str, ...] | None, field: Field) -> None:
        obj, path = target, base
        keys = list(field.path)
        for i, key in enumerate(keys):
            key = self._key(path, key, field.line)
            path = None if path is None else (*path, key)
            if path is not None:
                self.lines[path] = field.line
            if i < len(keys) - 1:
                obj = _writable(obj, key)
            else:
                self._set(obj, key, path, field)

    def _key(self, parent: tuple[str, ...] | None, key: str, line: int) -> str:
        if parent is None or len(parent) != 1 or parent[0] not in self.apart:
            return key
        index = self._counts.get(parent[0], 0)
        self._counts[parent[0]] = index + 1
        self.blocks.append(Block(parent[0], index, key, line))
        return block_key(parent[0], index)

    def _set(self, obj: RawObj, key: str, path: tuple[str, ...] | None, field: Field) -> None:
        concat = field.value
        if field.append:     # a += x  is  a = ${?a} [x]
            concat = Concat([Token("subst", Subst(path or (key,), True), "", field.line, field.col),
                             Arr([field.value], field.line)], field.line)
        objects = [p for p in concat.parts if not (isinstance(p, Token) and p.kind == "ws")]
        if objects and all(isinstance(p, Obj) for p in objects):
            into = _writable(obj, key)
            for part in objects:
                self.object(part, path, into)
            return
        if path is not None:
            self._note_spans(path, concat)
        prior = obj.items.get(key)
        pending = Pending(concat, path or (key,), prior, site=path)
        obj.items[key] = pending if prior is None or not _has_substitution(concat) else Merge(prior, pending)


    def _note_spans(self, path: tuple[str, ...], concat: Concat) -> None:
        """The span of a value written as text, or of each such element of a list, or of each such value
        of an object in a list (SeaTunnel's JSON form: ``"sink": [{"path": "out"}]`` -> ("sink", "[0]", "path"))."""
        if len(concat.parts) == 1 and isinstance(concat.parts[0], Arr):
            for i, item in enumerate(concat.parts[0].items):
                self._note_spans((*path, f"[{i}]"), item)
            return
        solid = [p for p in concat.parts if not (isinstance(p, Token) and p.kind == "ws")]
        if len(solid) == 1 and isinstance(solid[0], Obj):
            for field in solid[0].fields:
                self._note_spans((*path, *field.path), field.value)
            return
        if all(isinstance(p, Token) and p.kind != "subst" for p in concat.parts):
            first, last = concat.parts[0], concat.parts[-1]
            quote = ""
            if first is last and first.quoted:
                quote = '"' if first.quoted is True else first.quoted
            self.spans.setdefault(path, []).append(Span(first.start, last.end, quote))


def _writable(obj: RawObj, key: str) -> RawObj:
    """The object under ``key`` that later fields write into, made when there is none."""
    child = obj.items.get(key)
    if isinstance(child, RawObj):
        return child
    if isinstance(child, Merge) and isinstance(child.newer, RawObj):
        return child.newer
    fresh = RawObj()
    obj.items[key] = Merge(child, fresh) if isinstance(child, (Pending, Merge)) else fresh
    return fresh


def _has_substitution(concat: Concat) -> bool:
    return any(isinstance(p, Token) and p.kind == "subst" for p in concat.parts)


class _TooDeep(Exception):
    """An attempt nested ``_LEVELS`` deep: ``node`` is to be resolved first. ``chain`` is the
    substitutions in progress above it: they stay in progress, so a cycle through them is seen."""

    def __init__(self, node: Any, chain: list):
        super().__init__()
        self.node, self.chain = node, chain


class Resolver:
    """Resolves a built tree; every value is resolved once, and a cycle is an error."""

    def __init__(self, root: RawObj, environ: Mapping[str, str] | None = None, lines: dict | None = None):
        self.root = root
        self.nested = Builder(lines=lines)       # objects inside values; their keys' lines go to ``lines``
        self.environ = {} if environ is None else environ
        self.memo: dict[int, tuple[Any, Any]] = {}
        self.active: list[Pending] = []          # substitutions being resolved, outermost first
        self.in_progress: set[int] = set()       # their ids, for the cycle check at each of 5,000 links
        self.levels = 0
        self.built: dict[int, Any] = {}          # id of an Obj/Arr part -> what it was built into, once
        self.shapes = Shapes()                   # depth and size of each value, found once
        self.partial: dict[int, tuple[RawObj, dict]] = {}    # objects an attempt stopped inside: fields so far

    def value(self, raw: Any) -> Any:
        """``raw`` resolved, recursing at most ``_LEVELS`` deep: an attempt that would go deeper stops,
        the node it reached is resolved first, then the attempt starts again and finds it remembered.
        A chain of 5,000 substitutions (``k1 = ${k2}``, ``k2 = ${k3}`` ...) reads in 100 attempts,
        not 5,000 levels of Python's stack."""
        attempts = [(raw, len(self.active))]     # (node, substitutions in progress when it started)
        while True:
            node, base = attempts[-1]
            self.in_progress.difference_update(id(p) for p in self.active[base:])
            del self.active[base:]
            try:
                result = self._value(node)
            except _TooDeep as deeper:      # the stopped attempt's substitutions stay in progress
                self.in_progress.update(id(p) for p in deeper.chain[len(self.active):])
                self.active = deeper.chain
                attempts.append((deeper.node, len(self.active)))
                continue
            attempts.pop()
            if not attempts:
                return result

    def _value(self, raw: Any) -> Any:
        if not isinstance(raw, (RawObj, Merge, Pending)):
            return raw
        if id(raw) in self.memo:
            return self.memo[id(raw)][1]
        if self.levels >= _LEVELS:
            raise _TooDeep(raw, list(self.active))
        self.levels += 1
        try:
            self._remember(raw, self._resolve(raw))
        finally:
            self.levels -= 1
        return self.memo[id(raw)][1]

    def _resolve(self, raw: Any) -> Any:
        if isinstance(raw, RawObj):
            # An attempt started again (``value``) goes on from the field it stopped at: walking the
            # object's fields from the first each time cost fields x restarts (8,000 fields: 30 s).
            resolved = self.partial.setdefault(id(raw), (raw, {}))[1]
            for k, v in itertools.islice(raw.items.items(), len(resolved), None):
                resolved[k] = self._value(v)
            del self.partial[id(raw)]
            value = {k: v for k, v in resolved.items() if v is not UNDEFINED}
            if self.shapes.of(value)[1] > MAX_ELEMENTS:      # many keys, each a large substituted value
                largest = max(value, key=lambda k: self.shapes.of(value[k])[1])
                raise _too_large(_line_of(raw.items[largest]))
            return value
        if isinstance(raw, Merge):
            newer = self._value(raw.newer)
            if newer is UNDEFINED:
                return self._value(raw.older) if raw.older is not None else UNDEFINED
            if isinstance(newer, dict) and _holds_its_prior(raw):
                return newer        # ``a = ${a} {k = 1}``: merged onto the older value already
            if isinstance(newer, dict):
                older = self._value(raw.older) if raw.older is not None else None
                if isinstance(older, dict):
                    return self.shapes.merge(older, newer)
            return newer
        if id(raw) in self.in_progress:
            cycle = self.active[next(i for i, p in enumerate(self.active) if p is raw):]
            names = ["${" + ".".join(p.path) + "}" for p in cycle if p.path]
            names = ", ".join(names if len(names) <= 10 else [*names[:10], f"... {len(names) - 10} more"])
            raise HoconError(f"substitutions refer to each other in a cycle ({names})", raw.concat.line,
                             extent=_extent(raw.concat))
        self.active.append(raw)
        self.in_progress.add(id(raw))
        try:
            value = self.concat(raw)
        finally:
            self.in_progress.discard(id(self.active.pop()))
        if _has_substitution(raw.concat):
            depth, size = self.shapes.of(value)
            # the value's own object or list sits at the level of its key: the rule the parser applies
            if depth and too_deep(len(raw.site or ()) + depth - 1):
                raise HoconError(f"substitutions build a value here whose objects and lists nest more than "
                                 f"{MAX_NESTING} levels deep; a job needs a few levels: write it flatter",
                                 raw.concat.line, extent=_extent(raw.concat))
            if size > MAX_ELEMENTS:
                raise _too_large(raw.concat.line, _extent(raw.concat))
        return value

    def _remember(self, raw: Any, value: Any) -> None:
        # Keyed by id, so the node is kept alive with its value: a freed node's id is reused.
        self.memo[id(raw)] = (raw, value)

    def lookup(self, path: tuple[str, ...]) -> Any:
        node: Any = self.root
        for key in path:
            if isinstance(node, RawObj):
                node = node.items.get(key, _MISSING)
            else:
                value = self._value(node)
                node = value.get(key, _MISSING) if isinstance(value, dict) else _MISSING
            if node is _MISSING:
                return _MISSING
        return self._value(node)

    def substitution(self, token: Token, owner: Pending) -> Any:
        subst: Subst = token.value
        if owner.path is not None and subst.path == owner.path:      # ${a} inside a's own value
            found = self._value(owner.prior) if owner.prior is not None else UNDEFINED
        else:
            found = self.lookup(subst.path)
            if found is _MISSING:
                name = ".".join(subst.path)
                found = self.environ.get(name, UNDEFINED)
        if found is UNDEFINED and not subst.optional:
            name = ".".join(subst.path)
            raise HoconError(f"substitution ${{{name}}} is not defined", token.line, token.col, undefined=name,
                             extent=(token.start, token.end) if token.start >= 0 else None)
        return found

    def concat(self, pending: Pending) -> Any:
        parts: list[tuple[bool, Any]] = []          # (is whitespace, value)
        for part in pending.concat.parts:
            if isinstance(part, (Obj, Arr)):
                parts.append((False, self._part(part, pending.site)))
            elif part.kind == "subst":
                found = self.substitution(part, pending)
                if found is not UNDEFINED:
                    parts.append((False, found))
            else:
                parts.append((part.kind == "ws", part.value))
        return self.shapes.join(parts, pending.concat.line, UNDEFINED, _extent(pending.concat))

    def _part(self, part: Obj | Arr, site: tuple[str, ...] | None) -> Any:
        # Built once: an attempt started again (``value``) finds the nodes it left remembered.
        if id(part) not in self.built:
            self.built[id(part)] = self.nested.object(part, site) if isinstance(part, Obj) else [
                Pending(item, None, site=None if site is None else (*site, f"[{i}]"))
                for i, item in enumerate(part.items)]
        built = self.built[id(part)]
        if isinstance(part, Obj):
            return self._value(built)
        return [v for v in (self._value(item) for item in built) if v is not UNDEFINED]


def _holds_its_prior(merge: Merge) -> bool:
    """Whether ``merge.newer`` refers to the field's own earlier value (``merge.older``): an object
    built so holds it merged in, and merging it under again would change nothing, at the cost of
    a walk through all its keys (20,000 ``a = ${a} {kN = N}`` lines: 200 million steps)."""
    newer = merge.newer
    return (isinstance(newer, Pending) and newer.prior is merge.older and newer.path is not None
            and any(isinstance(p, Token) and p.kind == "subst" and p.value.path == newer.path
                    for p in newer.concat.parts))


def _extent(concat: Concat) -> tuple[int, int] | None:
    """Where a value is written, ``(start, end)`` in the text: an error about it is blamed on a
    variable filled in there (``job_text``), not on one elsewhere on its line."""
    solid = [p for p in concat.parts if not (isinstance(p, Token) and p.kind == "ws")] or concat.parts
    if not solid or solid[0].start < 0 or solid[-1].end < 0:
        return None
    return solid[0].start, solid[-1].end


def _too_large(line: int | None, extent: tuple[int, int] | None = None) -> HoconError:
    return HoconError(f"substitutions build a value of more than {MAX_ELEMENTS:,} elements here (a value "
                      f"holding another twice, over and over, doubles each time); a job needs far fewer: "
                      f"refer to a value once, or write it out", line, extent=extent)


def _line_of(raw: Any) -> int | None:
    """The line a raw value was written on, for an error about it (None for an object: its own keys say)."""
    if isinstance(raw, Pending):
        return raw.concat.line
    if isinstance(raw, Merge):
        return _line_of(raw.newer) or _line_of(raw.older)
    return None
