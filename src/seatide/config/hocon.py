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


def mark_plugin_blocks(text: str) -> tuple[str, list[BlockSite]]:
    """Rename plugin block keys to unique keys; return the new text and the block sites."""
    out: list[str] = []
    sites: list[BlockSite] = []
    stack: list[str | None] = []     # key that opened each enclosing {
    last_key: tuple[int, int, str] | None = None   # (start, end, text) of the latest key token
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
            last_key = (i, j + 1, text[i + 1:j])
            i = j + 1
            continue
        if ch == "{":
            key = last_key[2] if last_key else None
            section = _section_of(stack)
            if section and last_key:
                # a plugin block directly inside source/transform/sink
                start, end, name = last_key
                sites.append(BlockSite(section, counters[section], name, line))
                out.append(text[copied:start])
                out.append(f'"{BLOCK_MARK}{section}_{counters[section]}"')
                copied = end
                counters[section] += 1
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
        if ch in "[],=:":
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
        last_key = (i, j, text[i:j])
        i = j
    out.append(text[copied:])
    return "".join(out), sites


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
