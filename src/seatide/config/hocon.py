"""Reading HOCON/JSON job text: variables, duplicate plugin blocks, line numbers.

HOCON merges duplicate keys, but a job may hold two ``FakeSource { }`` blocks. Before
parsing, a small scanner renames every plugin block inside ``source``/``transform``/
``sink`` to a unique key and remembers where it starts, so messages can cite a line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SECTIONS = ("env", "source", "transform", "sink")
_PLUGIN_SECTIONS = ("source", "transform", "sink")
BLOCK_MARK = "__seatide_block_"
_VARIABLE = re.compile(r"\$\{(?!\?)([A-Za-z_][A-Za-z0-9_.\-]*)(?::([^}]*))?\}")
_UNQUOTED_STOP = set(' \t\r\n{}[],:="#+`^?!@*&\\$')


@dataclass(frozen=True)
class BlockSite:
    section: str
    index: int          # position within its section
    name: str           # plugin name as written
    line: int


# (scope, dotted key) -> line of the key. Scope is "env" or a plugin id ("sink[0]"); the
# dotted key is as flatten() spells it ("schema.fields.id"), so unknown options can be
# cited by the line the user wrote them on.
KeyLines = dict[tuple[str, str], int]


def substitute(text: str, variables: dict[str, str]) -> str:
    """Replace ``${name}`` / ``${name:default}`` for names given with ``-i name=value``.

    Names not given and without a default are left for HOCON to resolve (a path in the
    file or an environment variable); if it cannot, the loader reports the variable.
    """

    def repl(match: re.Match) -> str:
        name, default = match.group(1), match.group(2)
        if name in variables:
            return variables[name]
        if default is not None:
            return default
        return match.group(0)

    return _VARIABLE.sub(repl, text)


def mark_plugin_blocks(text: str) -> tuple[str, list[BlockSite], KeyLines]:
    """Rename plugin block keys to unique keys; return the new text, the block sites and
    the line of every key written in ``env`` and in plugin blocks."""
    out: list[str] = []
    sites: list[BlockSite] = []
    keys: KeyLines = {}
    stack: list[str | None] = []     # key that opened each enclosing {
    # (start, end, text, line) of the latest key-like token
    last_key: tuple[int, int, str, int] | None = None
    counters = {s: 0 for s in _PLUGIN_SECTIONS}
    i, n, line, copied = 0, len(text), 1, 0
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
            i += 1
            continue
        if ch == "#" or text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if text.startswith('"""', i):
            end = text.find('"""', i + 3)
            end = n if end < 0 else end + 3
            line += text.count("\n", i, end)
            last_key, i = None, end
            continue
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            last_key = (i, j + 1, text[i + 1:j], line)
            i = j + 1
            continue
        if ch == "{":
            key = last_key[2] if last_key else None
            section = _section_of(stack)
            if section and last_key:
                # a plugin block directly inside source/transform/sink
                start, end, name = last_key[:3]
                key = f"{BLOCK_MARK}{section}_{counters[section]}"
                sites.append(BlockSite(section, counters[section], name, line))
                out.append(text[copied:start])
                out.append(f'"{key}"')
                copied = end
                counters[section] += 1
            elif last_key:
                _note_key(keys, stack, last_key)
            stack.append(key)
            last_key = None
            i += 1
            continue
        if ch == "}":
            if stack:
                stack.pop()
            last_key = None
            i += 1
            continue
        if ch in "[],=:+":
            if ch in "=:+" and last_key:
                _note_key(keys, stack, last_key)
            if ch in "[],":
                last_key = None
            i += 1
            continue
        if ch in " \t\r":
            i += 1
            continue
        j = i
        while j < n and text[j] not in _UNQUOTED_STOP and not text.startswith("//", j):
            j += 1
        if j == i:
            i += 1
            continue
        last_key = (i, j, text[i:j], line)
        i = j
    out.append(text[copied:])
    return "".join(out), sites, keys


def _note_key(keys: KeyLines, stack: list[str | None], token: tuple) -> None:
    """Record the line of a key in env or in a plugin block (keys inside lists are skipped)."""
    _, _, name, line = token
    path = list(stack)
    if path and path[0] is None:      # the whole file wrapped in { }
        path = path[1:]
    if not path or None in path:
        return
    if path[0] == "env":
        scope, inner = "env", path[1:]
    elif path[0] in _PLUGIN_SECTIONS and len(path) >= 2 and path[1].startswith(BLOCK_MARK):
        section, index = unmark(path[1])
        scope, inner = f"{section}[{index}]", path[2:]
    else:
        return
    keys[(scope, ".".join([*inner, name]))] = line


def _section_of(stack: list[str | None]) -> str | None:
    """The plugin section whose direct child block is about to open, if any."""
    path = [k for k in stack]
    if path and path[0] is None:      # the whole file wrapped in { }
        path = path[1:]
    if len(path) == 1 and path[0] in _PLUGIN_SECTIONS:
        return path[0]
    return None


def unmark(key: str) -> tuple[str, int] | None:
    """``__seatide_block_source_2`` -> ("source", 2)."""
    if not key.startswith(BLOCK_MARK):
        return None
    section, _, index = key[len(BLOCK_MARK):].rpartition("_")
    return section, int(index)
