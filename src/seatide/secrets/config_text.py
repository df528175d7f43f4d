"""Where a job file's text holds a secret besides its credential options' own values (review 8, F7).

``secrets.mask_config`` masks the value written at a credential-named option, and the job's known secrets
where they show (an ordinary word, ``letmein``, only as an option's value: ``user = postgres`` stays). Three
places held a credential all the same: the value a credential option refers to (``password = ${creds.pg}``,
with ``creds { pg = "letmein" }`` elsewhere in the file), a variable's default that the option takes
(``password = "${db_pw:changeme}"``), and a credential commented out (``# password = "Old-Pa55word!"``).
"""

from __future__ import annotations

import re
from typing import Callable, Iterable, Mapping

from seatide.config.hocon import Span
from seatide.secrets.names import is_secret_key

# Where a comment may start, HOCON's two kinds, and a quoted string (a ``#`` or ``//`` in it is the string's).
_COMMENT_OR_QUOTED = re.compile(r'"(?:[^"\\\n]|\\.)*"|#|//')
# An option's value that holds a reference, to its line's end or a comma outside quotes: ``password = ${creds.pg}``,
# ``"x-"${creds.pg}`` (a prefix joined before it), ``${a}${b}``; the key may be quoted.
_ASSIGNED = re.compile(r"""(?<![\w.\-"])(?P<key>"[^"\n]*"|[A-Za-z][\w.\-]*)[ \t]*[=:][ \t]*"""
                       r"""(?P<value>(?:"(?:[^"\\\n]|\\.)*"|\$\{[^}\n]*\}|[^\n,}"$#])*\$\{[^}\n]*\}"""
                       r"""(?:"(?:[^"\\\n]|\\.)*"|\$\{[^}\n]*\}|[^\n,}"$#])*)""")
_REFERENCE = re.compile(r"\$\{\??(?P<ref>[^}\n]+)\}")
_LITERAL = re.compile(r'\$\{[^}\n]*\}|"(?:[^"\\\n]|\\.)*"')     # a reference's own quotes are its path's
_PATH_PART = re.compile(r'"(?P<quoted>[^"]*)"|(?P<bare>[^."\s]+)')
_CHAIN = 8      # references followed from a credential option, at most: a loop in the file ends here
# A variable with its default: ``${db_pw:changeme}``, ``${db_pw:"S3cret"}`` (config/job_text.py's _VARIABLE).
_DEFAULT = re.compile(r"""\$\{(?!\?)[A-Za-z_][A-Za-z0-9_.\-]*:(?P<q>["']?)(?P<default>[^}"']*)(?P=q)\}""")


def referred_spans(text: str, spans: Mapping[tuple[str, ...], Iterable]) -> list:
    """Where what credential options refer to is written: ``creds.pg``'s span, for ``password = ${creds.pg}``; along
    a chain (``creds { pg = ${vault.pg} }``: ``vault.pg``'s too), a quoted path's (``${"creds"."pg"}``); and the
    literals joined to a reference in a credential's value (``"v2-"${vault.pg}``: review 9, F8)."""
    at, lines = 0, []
    for line in text.split("\n"):      # only a line with a reference is read (a long line without is read once)
        lines += [(at, line)] if "${" in line else []
        at += len(line) + 1
    assigned = [(_path(m["key"]), m, start) for start, line in lines for m in _ASSIGNED.finditer(line)]
    found, referred = [], set()
    for key, m, start in assigned:
        if is_secret_key(".".join(key)):
            referred |= _refs(m)
            found += [Span(start + m.start("value") + lit.start(), start + m.start("value") + lit.end(), '"')
                      for lit in _LITERAL.finditer(m["value"]) if lit[0].startswith('"')]
    for _ in range(_CHAIN):     # a referred path that is itself set to a reference, as written (its last keys)
        more = {ref for key, m, _ in assigned for path in referred if path[-len(key):] == key for ref in _refs(m)}
        if more <= referred:
            break
        referred |= more
    return found + [span for path in referred for span in spans.get(path, ())]


def _refs(assignment: re.Match) -> set[tuple[str, ...]]:
    return {_path(ref["ref"]) for ref in _REFERENCE.finditer(assignment["value"])}


def _path(written: str) -> tuple[str, ...]:
    """A HOCON path as written, its parts unquoted: ``"creds"."pg"`` -> ("creds", "pg")."""
    return tuple(m["quoted"] if m["quoted"] is not None else m["bare"] for m in _PATH_PART.finditer(written))


def mask_defaults(text: str, secrets: frozenset[str], mask: str) -> str:
    """Each variable's default that is one of the job's secrets (a credential option took it), masked."""
    def masked(m: re.Match) -> str:
        if m["default"] not in secrets:
            return m[0]
        return m[0][:m.start("default") - m.start()] + mask + m[0][m.end("default") - m.start():]
    return _DEFAULT.sub(masked, text)


def mask_comments(text: str, mask_line: Callable[[str], str]) -> str:
    """Each comment masked as a message is, a whole line's or one after a value (``url = "..."  # was:
    password=Old-Pa55word!``, review 9 F6): a credential commented out is a credential still."""
    lines = text.split("\n")
    for at, line in enumerate(lines):
        lead = next((m for m in _COMMENT_OR_QUOTED.finditer(line) if m[0] in ("#", "//")), None)
        if lead is not None:
            lines[at] = line[:lead.end()] + mask_line(line[lead.end():])
    return "\n".join(lines)


__all__ = ["mask_comments", "mask_defaults", "referred_spans"]
