"""What a job file takes from the environment of the command that submits it.

SeaTunnel fills a ``${name}`` that no ``-i`` gives from the environment variable of that name, in the
client that reads the job file. SeaTide does the same, and only there: ``seatide run``, ``submit``,
``check``, ``resume`` (and SeaTunnel's command line) find the names the file takes from their environment
and send those values as variables, beside the ``-i`` ones. Whoever reads the job afterwards (a
coordinator, a worker, a driver) resolves it from its text and variables alone, never from its own
environment (``job_text._read``): a job submitted over REST cannot show a coordinator's
``AWS_SECRET_ACCESS_KEY`` as its name, and a value taken from the environment under a credential's name
(or listed in ``secret.variables``) is a secret variable like any ``-i`` one, masked wherever it shows.
"""

from __future__ import annotations

import re
from typing import Any, Iterator, Mapping

from seatide.config.hocon import HoconError, parse
from seatide.config.hocon.lexer import tokenize
from seatide.config.job_text import PLUGIN_SECTIONS, referred_names, substitute

# A name ``-i`` can give (job_text's _VARIABLE): one the file takes under another spelling cannot be sent.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
# Rounds of looking: a value taken may itself name another (``JOBNAME=${USER_TAG}``), as a ``-i`` one may.
_ROUNDS = 8


class _Taken(Mapping[str, str]):
    """An environment that remembers what HOCON looked up in it and found. A name it lacks reads as empty, so the
    search goes on past it (a resume's file names one that the job's own variables give: ``${NAME}``)."""

    def __init__(self, environ: Mapping[str, str]):
        self.environ, self.found = environ, {}

    def __getitem__(self, name: str) -> str:
        value = self.environ[name]
        self.found[name] = value
        return value

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self.environ else ""

    def __iter__(self) -> Iterator[str]:
        return iter(self.environ)

    def __len__(self) -> int:
        return len(self.environ)


def environment_variables(text: str, variables: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """The variables ``text`` takes from ``environ``: each ``${name}`` or ``${?name}`` that neither ``variables``
    nor the file defines and ``environ`` does, each value as the environment gave it: filled in exactly as the
    same ``-i name=value`` is, so a job is the same job whichever way its value came. A name inside a quoted
    string counts (the pre-pass fills ``-i`` values in there too: ``"file://${warehouse}"``); one in a comment
    does not. A text that does not parse takes what was found before it failed (its loader says what is wrong)."""
    given = dict(variables)
    taken: dict[str, str] = {}
    for _ in range(_ROUNDS):
        found = _referred({**taken, **given}, text, environ)
        new = {name: value for name, value in found.items() if name not in given and name not in taken}
        if not new:
            break
        taken.update(new)
    return taken


def _referred(variables: dict[str, str], text: str, environ: Mapping[str, str]) -> dict[str, str]:
    filled = substitute(text, variables)
    looked_up = _Taken(environ)
    try:    # outside quotes: what HOCON resolves from the environment (not a path the file defines)
        parse(filled, apart=PLUGIN_SECTIONS, environ=looked_up)
    except HoconError:
        pass
    found = dict(looked_up.found)
    try:    # inside quoted strings: what the pre-pass would fill in, were it given
        quoted = [token.value for token in tokenize(filled) if token.kind == "str" and token.quoted]
    except HoconError:
        quoted = []
    found.update({name: environ[name] for value in quoted for name in referred_names(value) if name in environ})
    return {name: value for name, value in found.items() if _NAME.fullmatch(name)}


def with_environment(text: str, variables: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """``variables`` and what ``text`` takes from ``environ`` (the ``-i`` ones first: they win)."""
    return {**environment_variables(text, variables, environ), **variables}
