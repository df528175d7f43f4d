"""How deep and how large each object or list the resolver builds is, found once per value.

Substitutions share values: ``a1 = [${a0}, ${a0}]`` holds ``a0`` twice, so ``a25`` is a tree of
2^25 elements made of 26 lists. Walking each substituted value to check its depth (as the reader
once did) cost the tree's size every time: exponential on that shape, quadratic on 20,000
``a += i`` lines. Here a value's depth and size (as a tree: a shared value counts each time it
appears, as every later walk of the job sees it) are kept by id, and a list joined or an object
merged gets its shape from its parts' shapes, not from a walk."""

from __future__ import annotations

from typing import Any

from seatide.config.hocon.values import HoconError, text_of

# Elements one value built by substitutions may hold, as a tree. A job holds thousands; more
# than this is a value doubled over and over, which every later walk (masking, planning, JSON)
# would take minutes or memory to go through.
MAX_ELEMENTS = 1_000_000


class Shapes:
    """Depth (an object or list of plain values is 1, a plain value 0) and size (elements as a
    tree, itself included) of each object and list, by id; the value is kept so its id stays its own."""

    def __init__(self) -> None:
        self.known: dict[int, tuple[Any, int, int]] = {}

    def of(self, value: Any) -> tuple[int, int]:
        """``value``'s (depth, size): remembered, or found by one walk of the parts not yet known."""
        if not isinstance(value, (dict, list)):
            return 0, 1
        if id(value) not in self.known:
            todo = [(value, False)]
            while todo:         # a walk, not a recursion: the value may be too deep to recurse
                node, ready = todo.pop()
                if id(node) in self.known:
                    continue
                items = list(node.values() if isinstance(node, dict) else node)
                if not ready:
                    todo.append((node, True))
                    todo.extend((item, False) for item in items
                                if isinstance(item, (dict, list)) and id(item) not in self.known)
                    continue
                shapes = [self.of(item) for item in items]
                self._note(node, 1 + max((d for d, _ in shapes), default=0), 1 + sum(s for _, s in shapes))
        return self.known[id(value)][1:]

    def _note(self, value: Any, depth: int, size: int) -> Any:
        self.known[id(value)] = (value, depth, size)
        return value

    def joined(self, lists: list[list]) -> list:
        """The lists one after another: as deep as the deepest, their elements together."""
        shapes = [self.of(v) for v in lists]
        out: list = []
        for v in lists:
            out += v        # copied at C speed: 20,000 ``a += i`` lines copy 200 million items
        return self._note(out, max(d for d, _ in shapes),
                          1 + sum(s - 1 for _, s in shapes))

    def merge(self, older: dict, newer: dict) -> dict:
        """``newer`` over ``older``: objects under the same key merge, anything else is replaced.
        Its shape comes from ``older``'s and the keys ``newer`` sets, unless a key it replaces was
        one of the deepest: then from its keys' shapes."""
        out = dict(older)
        depth, size = self.of(older)
        deepest, unsure = 0, False
        for key, value in newer.items():
            if key in out:
                old_depth, old_size = self.of(out[key])
                unsure = unsure or old_depth + 1 == depth
                size -= old_size
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                value = self.merge(out[key], value)
            out[key] = value
            new_depth, new_size = self.of(value)
            deepest, size = max(deepest, new_depth + 1), size + new_size
        if unsure:
            depth = 1 + max((self.of(v)[0] for v in out.values()), default=0)
        return self._note(out, max(depth, deepest), size)

    def join(self, parts: list[tuple[bool, Any]], line: int, undefined: Any,
             extent: tuple[int, int] | None = None) -> Any:
        """Parts of one value, ``(is whitespace, value)``, concatenated: text as text, lists into one
        list, objects merged; an object or list with text is an error."""
        values = [v for ws, v in parts if not ws]
        if not values:
            return undefined
        if len(parts) == 1:
            return parts[0][1]
        if any(isinstance(v, (dict, list)) for v in values):
            if all(isinstance(v, dict) for v in values):
                out = values[0]     # merged onto, not copied first: merge copies what it changes
                for v in values[1:]:
                    out = self.merge(out, v)
                return out
            if all(isinstance(v, list) for v in values):
                return self.joined(values) if len(values) > 1 else values[0]
            raise HoconError("a value joins an object or a list with text or with the other kind; put text "
                             "in double quotes, or separate the values with a comma or a new line", line, extent=extent)
        return "".join(v if ws else text_of(v) for ws, v in parts)
