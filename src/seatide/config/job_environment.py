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

import json
import re
from typing import Any, Iterator, Mapping

from seatide.config.hocon import HoconError, parse
from seatide.config.job_text import PLUGIN_SECTIONS, substitute

# A name ``-i`` can give (job_text's _VARIABLE): one the file takes under another spelling cannot be sent.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
# A value written as it is reads back as the same string: no HOCON syntax in it, no ``//`` (a comment), not a
# word HOCON reads as a boolean or null. Any other is sent quoted, as JSON quotes it (HOCON reads JSON's escapes).
_AS_IS = re.compile(r"[A-Za-z0-9_.\-]+")
_NOT_STRINGS = frozenset({"true", "false", "null", "yes", "no", "on", "off"})


class _Taken(Mapping[str, str]):
    """An environment that remembers what HOCON looked up in it and found."""

    def __init__(self, environ: Mapping[str, str]):
        self.environ, self.found = environ, {}

    def __getitem__(self, name: str) -> str:
        value = self.environ[name]
        self.found[name] = value
        return value

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self.environ else default

    def __iter__(self) -> Iterator[str]:
        return iter(self.environ)

    def __len__(self) -> int:
        return len(self.environ)


def environment_variables(text: str, variables: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """The variables ``text`` takes from ``environ``: each ``${name}`` or ``${?name}`` that neither ``variables``
    nor the file defines and ``environ`` does, with its value written so that filling it in as a variable gives
    the string the environment gave. A text that does not parse takes none (its loader says what is wrong)."""
    given = dict(variables)
    taken = _Taken(environ)
    try:
        parse(substitute(text, given), apart=PLUGIN_SECTIONS, environ=taken)
    except HoconError:
        pass
    return {name: as_variable(value) for name, value in taken.found.items()
            if name not in given and _NAME.fullmatch(name)}


def as_variable(value: str) -> str:
    """``value`` as a variable's text that HOCON reads back as the string ``value``."""
    if _AS_IS.fullmatch(value) and value.lower() not in _NOT_STRINGS:
        return value
    return json.dumps(value, ensure_ascii=False)


def with_environment(text: str, variables: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """``variables`` and what ``text`` takes from ``environ`` (the ``-i`` ones first: they win)."""
    return {**environment_variables(text, variables, environ), **variables}
