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

from seatide.secrets.names import is_secret_key

# Where a comment may start, HOCON's two kinds, and a quoted string (a ``#`` or ``//`` in it is the string's).
_COMMENT_OR_QUOTED = re.compile(r'"(?:[^"\\\n]|\\.)*"|#|//')
# A credential-named option set to a reference: ``password = ${creds.pg}`` (``${?creds.pg}`` too).
_REFERENCE = re.compile(r"""(?P<key>[A-Za-z][\w.\-]*)["']?[ \t]*[=:][ \t]*\$\{\??(?P<ref>[\w.\-]+)\}""")
# A variable with its default: ``${db_pw:changeme}``, ``${db_pw:"S3cret"}`` (config/job_text.py's _VARIABLE).
_DEFAULT = re.compile(r"""\$\{(?!\?)[A-Za-z_][A-Za-z0-9_.\-]*:(?P<q>["']?)(?P<default>[^}"']*)(?P=q)\}""")


def referred_spans(text: str, spans: Mapping[tuple[str, ...], Iterable]) -> list:
    """Where the values that credential options refer to are written: ``creds.pg``'s span, for
    ``password = ${creds.pg}``."""
    referred = {tuple(m["ref"].split(".")) for m in _REFERENCE.finditer(text) if is_secret_key(m["key"])}
    return [span for path in referred for span in spans.get(path, ())]


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
