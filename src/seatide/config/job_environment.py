"""The environment a job's ``${NAME}`` falls back to: the submitter's, recorded with the job.

HOCON reads a substitution the file does not define from the environment, as Typesafe Config
does. A job is parsed by several processes: the coordinator that records it (a REST submit), the
leader, workers and drivers. Had each read its own environment, a REST client could read a
coordinator's (``${PGPASSWORD}`` in a job name, in an option's error message, in the job's output),
and a job's values would depend on which process read it. So the environment is the submitter's:
the ``seatide`` command that submits a job (submit, run, resume, ``seatunnel.sh``) captures, from
its own environment, the names the file falls back to (``config.job_text.captured_environment``),
and they are stored with the job's variables, beside the user's:

    {"tenant": "acme", "$env": "1", "$env.HOME": "/home/op"}

``$env`` marks a row whose environment was recorded, an empty one too (a REST request carries
none): such a row is parsed with exactly that map, by every process. A row without it was stored
before SeaTide recorded environments and is parsed with the process's environment, as it always was,
so old jobs keep running unchanged. A user variable's name may not start with ``$``
(``name_refusal``): no user name can be read as one of these entries.

A SeaTide from before the mark would read such a row with its own process's environment: store revision 0021
keeps its new processes off the store (they refuse a revision they do not know), ``nodes.features`` keeps jobs
from older workers already running, revision 0022 keeps older coordinators from leading, and a marked job waits
for a leader of this version (``store.node_features``); the CLI sends a submit or
resume that records an environment only to routes an older coordinator does not serve (``POST /api/v1/jobs``,
``POST /api/v1/jobs/{id}/incarnations``): it answers 404 or 405 and records nothing.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

MARK = "$env"
PREFIX = MARK + "."
# Marks a row whose user variables' values are written into the text as given (``config.filling``); a row without it
# was stored before, when they were pasted raw, and is read so still: a restart or resume reads what it always read.
AS_GIVEN = "$as-given"


def split(variables: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str] | None]:
    """A job's stored variables -> (the user's variables, the recorded environment); the environment
    is None for a row stored before environments were recorded (no ``$env`` mark)."""
    user = {name: value for name, value in variables.items() if not name.startswith(MARK) and name != AS_GIVEN}
    if MARK not in variables:
        return user, None
    return user, {name[len(PREFIX):]: value for name, value in variables.items() if name.startswith(PREFIX)}


def marked(user: Mapping[str, str], environment: Mapping[str, str], given: bool = True) -> dict[str, str]:
    """The variables to store: the user's, the mark, each recorded environment variable and, for values written
    as given (every new submit: ``given``), ``AS_GIVEN``."""
    rule = {AS_GIVEN: "1"} if given else {}
    return {**user, MARK: "1", **{PREFIX + name: value for name, value in environment.items()}, **rule}


def as_given(variables: Mapping[str, str]) -> bool:
    """Whether stored variables' values are written as given (``AS_GIVEN``), else pasted raw (``config.filling``)."""
    return AS_GIVEN in variables


def given(variables: Mapping[str, str]) -> dict[str, str]:
    """A command's own variables (``seatide check``), read as a submit of them would be: as given."""
    return {**variables, AS_GIVEN: "1"}


# An environment variable's name a job's text can refer to (``${NAME}``, ``${a.b}``: HOCON asks the environment for the
# path's elements joined by dots): a letter or ``_``, then letters, digits, ``_`` and ``-``, in dot-separated parts.
# Another name (``$env``, ``x\ny``, ``.``) no text can look up: it could only be a mistake (outside review L3).
_ENVIRONMENT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*")
# What one request may record: the CLI sends only the names the text uses, far fewer.
MAX_NAMES = 1000
MAX_VALUE_BYTES = 64 * 1024


def environment_refusal(environment: Mapping[str, str]) -> str | None:
    """Why an environment given with a job (a REST request's ``environment``) may not be recorded, or None."""
    if len(environment) > MAX_NAMES:
        return (f"environment has {len(environment)} names; at most {MAX_NAMES} may be given: send only the names "
                "the config's ${NAME}s fall back to (the seatide CLI sends just those)")
    for name, value in environment.items():
        if not isinstance(name, str) or not _ENVIRONMENT_NAME.fullmatch(name):
            return (f"environment variable name {name!r} is not one a config can refer to: a name is a letter or '_', "
                    "then letters, digits, '_' or '-', in parts separated by '.' (pattern "
                    f"{_ENVIRONMENT_NAME.pattern})")
        if not isinstance(value, str):
            return f"environment variable {name}: its value must be a string, got {type(value).__name__}"
        if len(value.encode("utf-8", "surrogatepass")) > MAX_VALUE_BYTES:
            return (f"environment variable {name}: its value is {len(value.encode('utf-8', 'surrogatepass'))} "
                    f"bytes; at most {MAX_VALUE_BYTES} (64 KiB) may be given")
    return None


def name_refusal(names: Iterable[str], what: str = "variable") -> str | None:
    """Why these names may not be given as variables (or as an environment's names), or None."""
    for name in names:
        if not isinstance(name, str) or not name.strip():
            return f"a {what} needs a name: got an empty one (-i NAME=VALUE)"
        if what == "variable" and name.startswith("$"):
            return (f"variable name {name!r} starts with '$', which SeaTide keeps for the environment it "
                    "records with a job; give the variable another name")
    return None


def how_to_define(name: str) -> str:
    """How to give ``${name}`` a value, for a "not defined" message. The shell's environment (the CLI captures it),
    a REST request's ``environment`` and ``-i`` (``config.pasted_values``) carry any value as given. No
    ``NAME=...`` here: the masker takes a credential-like name's ``=`` for a pair and masked the placeholder."""
    return (f"define it in the file, or set {name} in the environment of the seatide command that submits the job "
            f"(seatide submit, run or resume, seatunnel.sh), or give it in a REST request's \"environment\" field, "
            f"or with -i (a REST request's \"variables\")")


class Recording:
    """An environment that notes every name a parse asks of it (``Resolver`` only calls ``get``):
    the names the file fell back to, found or not, optional ones (``${?X}``) too."""

    def __init__(self, environ: Mapping[str, str]):
        self.environ = environ
        self.asked: set[str] = set()

    def get(self, name: str, default=None):
        self.asked.add(name)
        return self.environ.get(name, default)


class Fed(str):
    """A value an environment variable fed into: a recorded value itself, or a resolved value of the job it is
    part of (``"nightly_"${T}``). Secret by where it came from, so the masker masks it whole wherever a text is
    exactly it, however short or ordinary it is (``secrets.known.mask_values``), never only by searching text."""

    __slots__ = ()


# Stands for each recorded value in a second parse (``fed_values``); no text or environment holds it.
_MARK = "\x00seatide-environment\x00"


def fed_values(resolved: object, environment: Mapping[str, str], reparse) -> frozenset[Fed]:
    """The values of the resolved tree ``resolved`` that an environment substitution fed into, and the recorded
    values: the text is parsed again (``reparse(environ)``) with every recorded value replaced by a mark, and a
    value whose twin holds the mark came from the environment, through any chain of substitutions. A value
    keeps its shape whatever an environment variable holds (HOCON reads it as a string, never parses it), so
    the two trees match path by path."""
    found = {Fed(value) for value in environment.values() if value}
    if environment:
        _twins(resolved, reparse({name: _MARK for name in environment}), found)
    return frozenset(found)


def _twins(value: object, twin: object, found: set) -> None:
    if isinstance(value, Mapping) and isinstance(twin, Mapping):
        for key, item in value.items():
            if key in twin:
                _twins(item, twin[key], found)
    elif isinstance(value, list) and isinstance(twin, list):
        for item, other in zip(value, twin):
            _twins(item, other, found)
    elif isinstance(twin, str) and _MARK in twin and value not in (None, ""):
        found.add(Fed(value if isinstance(value, str) else str(value)))
