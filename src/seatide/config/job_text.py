"""A job's text, read once: variables filled in, HOCON parsed, where each key was written.

Everything else a process derives from a job (its validated config and plan, its secrets,
its outline, its Spark settings) starts from one ``JobText``. ``read_job_text`` parses a
given (text, variables) once per process and hands the same tree to every caller, so the
tree is read-only: code that needs to change a block copies it first.
"""

from __future__ import annotations

import bisect
import itertools
import functools
import os
import re
from dataclasses import dataclass
from typing import Any, Mapping

from seatide.config.filling import SINK_PLACEHOLDERS, VARIABLE, Filled, Unfillable, at_fault, fill, unquoted
from seatide.config.hocon import BLOCK_MARK, HoconError, Span, parse
from seatide.config.hocon.lexer import tokenize
from seatide.config.job_environment import Fed, Recording, as_given, fed_values, marked, split

SECTIONS = ("env", "source", "transform", "sink")
PLUGIN_SECTIONS = ("source", "transform", "sink")


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


class JobTextError(ValueError):
    """The text does not parse; ``reason`` says why, ``line`` where (if known), ``undefined``
    names a variable nothing defines."""

    def __init__(self, reason: str, line: int | None = None, undefined: str | None = None):
        super().__init__(reason)
        self.reason, self.line, self.undefined = reason, line, undefined


@dataclass(frozen=True)
class JobText:
    """One parse of a job: the tree (plugin blocks under unique keys, see ``unmark``), the
    site of each plugin block, the line of each key in ``env`` and plugin blocks, and where
    each value written as text sits in ``text`` (``spans``, by the value's path; a value that
    came from a ``-i`` variable has none). ``variables`` are the user's; ``environment`` the one
    recorded with the job (``config.job_environment``), None for a row read with the process's."""

    text: str
    variables: tuple[tuple[str, str], ...]
    tree: dict
    sites: Mapping[tuple[str, int], BlockSite]
    keys: KeyLines
    spans: Mapping[tuple[str, ...], tuple[Span, ...]] = None
    environment: tuple[tuple[str, str], ...] | None = None
    given: bool = False     # the user's values written as given (config.filling), else pasted raw: an old row

    @property
    def variable_map(self) -> dict[str, str]:
        return dict(self.variables)


def read_job_text(text: str, variables: Mapping[str, str] | None = None) -> JobText:
    """The parsed job; ``JobTextError`` if it does not parse. Cached per process by text and
    variables: submit, secrets, outline and the driver's settings share one parse.

    ``variables`` as a job stores them: with a recorded environment (``config.job_environment``)
    a ``${NAME}`` the file does not define reads that map and nothing else; without one (a row
    stored before environments were recorded, the CLI's own ``check``) it reads this process's. Marked
    ``job_environment.AS_GIVEN``, the user's values are written as given; unmarked (a row stored before), pasted
    raw, as that row always read (``config.filling``)."""
    return _read(text, tuple(sorted((str(k), str(v)) for k, v in (variables or {}).items())))


@functools.lru_cache(maxsize=256)
def _read(text: str, variables: tuple[tuple[str, str], ...]) -> JobText:
    user, environment = split(dict(variables))
    given = as_given(dict(variables))
    filled, replaced = _substitute(text, user, given)
    environ = os.environ if environment is None else environment
    try:
        doc = parse(filled, apart=PLUGIN_SECTIONS, environ=environ)
    except HoconError as exc:
        raise _as_written_error(exc, text, user, given, filled, replaced, environ) from None
    if not isinstance(doc.value, dict):
        raise JobTextError("a job file must be an object with env, source, transform, sink")
    written = _LinesAsWritten(text, filled, replaced)
    sites = {(b.parent, b.index): BlockSite(b.parent, b.index, b.name, written.line(b.line)) for b in doc.blocks}
    lines = {path: written.line(line) for path, line in doc.lines.items()}
    return JobText(text, tuple(sorted(user.items())), doc.value, sites, _key_lines(lines),
                   _as_written(doc.spans, replaced),
                   None if environment is None else tuple(sorted(environment.items())), given)


def environment_fed(job: JobText) -> frozenset[Fed]:
    """The recorded environment's values and every value of ``job`` one fed into (``job_environment.fed_values``):
    what the masker masks whole, by origin. None for a row read with the process's environment."""
    return _fed(job.text, job.variables, job.environment or (), job.given)


@functools.lru_cache(maxsize=256)
def _fed(text: str, user: tuple[tuple[str, str], ...], environment: tuple[tuple[str, str], ...],
         given: bool) -> frozenset[Fed]:
    if not environment:
        return frozenset()
    filled = _substitute(text, dict(user), given)[0]
    resolved = read_job_text(text, {**dict(user), **marked({}, dict(environment), given)}).tree
    return fed_values(resolved, dict(environment),
                      lambda environ: parse(filled, apart=PLUGIN_SECTIONS, environ=environ).value)


def captured_environment(text: str, variables: Mapping[str, str] | None = None,
                         environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a submitter records (``config.job_environment``): each name the file's substitutions fall
    back to, with its value in ``environ`` (the submitting command's environment), if it has one.

    The names are those a parse with ``environ`` asks for (``Recording``), optional ones too: the parse
    the job gets with the map recorded asks the same names and gets the same answers, so it resolves as
    it does here. A parse that fails here stops asking; every substitution the text holds is then taken
    too (``substitution_names``), so the job's processes see what this one saw, its error included; so is one
    nested too deep to parse here (``x = [[[...``: a ``RecursionError`` was the submitting command's traceback).
    ``variables``: the ones about to be submitted, whose values are written as given (``config.filling``)."""
    environ = os.environ if environ is None else environ     # read when called: the zygote imports this module
    user = split(dict(variables or {}))[0]
    recording = Recording(environ)
    try:
        read = _substitute(text, user, True)[0]
        parse(read, apart=PLUGIN_SECTIONS, environ=recording)
    except (HoconError, JobTextError, RecursionError):   # past Python's stack: the tokens are read without recursion
        recording.asked |= substitution_names(text, user, True)
    return {name: environ[name] for name in sorted(recording.asked) if name in environ}


def substitution_names(text: str, variables: Mapping[str, str], given: bool) -> set[str]:
    """Every ``${name}`` / ``${?name}`` HOCON reads once ``variables`` are filled in: the names the text may
    fall back to the environment for (a path the file defines is one too). A text that does not tokenize
    falls back to none: its parse fails before anything is looked up. ``given``: the row's rule (``config.filling``)."""
    try:
        tokens = tokenize(_substitute(text, dict(variables), given)[0])
    except (HoconError, JobTextError):
        return set()
    return {".".join(token.value.path) for token in tokens if token.kind == "subst"}


class _LinesAsWritten:
    """Line N of the filled text -> its line in the text as written: a value of three lines filled
    in on line 2 leaves what the user wrote on line 7 on line 7."""

    def __init__(self, text: str, filled: str, replaced: list[Filled]):
        self.text, self.filled, self.replaced = text, filled, replaced
        self.shifts = _Shifts(replaced)
        # No value (nor a ``${name:default}`` it replaced) spans lines: every line stays where it was.
        self.same = not any("\n" in filled[f.start:f.end] or "\n" in f.placeholder(text) for f in replaced)
        self.starts: list[int] = []         # where each line starts, in the filled text
        self.newlines: list[int] = []       # where each line ends, in the text as written

    def line(self, line: int) -> int:
        if self.same:
            return line
        if not self.starts:
            self.starts = [0] + [m.end() for m in re.finditer("\n", self.filled)]
            self.newlines = [m.start() for m in re.finditer("\n", self.text)]
        return bisect.bisect_left(self.newlines, _written_offset(self.starts[line - 1], self.shifts)) + 1


def _as_written_error(exc: HoconError, text: str, variables: dict[str, str], given: bool, filled: str,
                      replaced: list[Filled], environ: Mapping[str, str]) -> JobTextError:
    """``exc`` as the text as written shows it: its line counted there (a value of three lines filled
    in above it does not move it), and a fault a filled value causes blamed on the variable, quoting
    nothing of the value: values given with -i are often passwords."""
    extent = exc.extent
    if extent is None:      # no place within its line: no variable is blamed, the line is counted as written
        start = 0
        for _ in range((exc.line or 1) - 1):
            start = filled.find("\n", start) + 1
        line = None if exc.line is None else text.count("\n", 0, _written_offset(start, replaced)) + 1
        return JobTextError(exc.reason, line, exc.undefined)
    line = text.count("\n", 0, _written_offset(extent[0], replaced)) + 1
    blamed = at_fault(replaced, extent) or _culprit(text, variables, given, replaced, environ)
    if blamed is None:
        return JobTextError(exc.reason, line, exc.undefined)
    line = text.count("\n", 0, blamed.written) + 1
    value = variables.get(blamed.name, "")
    if not given:
        advice = ("this job was stored before values were written as given, so its values are read as HOCON where "
                  "they stand; submit it again, or give a value holding quotes, brackets, braces, commas or new "
                  "lines as a quoted HOCON string (its \\ and \" escaped)")
    elif value.strip()[:1] in ("[", "{"):
        advice = ("a value written as a list [...] or an object {...} is read as one; give text as a quoted HOCON "
                  "string (\"...\", its \\ and \" escaped)")
    else:
        advice = f"see what stands around ${{{blamed.name}}} on line {line}"
    return _value_error(blamed.name, line, f"does not parse here (line {line}): "
                        f"{unquoted(exc.reason, list(variables.values()))}. {advice[0].upper()}{advice[1:]}")


def _value_error(name: str, line: int, why: str) -> JobTextError:
    """A variable's value is at fault: the error names the variable, never the value (often a password)."""
    return JobTextError(f"the value of variable {name} {why}. The value is not shown: it may be a secret", line)


def _culprit(text: str, variables: dict[str, str], given: bool, replaced: list[Filled],
             environ: Mapping[str, str]) -> Filled | None:
    """The variable whose value breaks the text though the error is found elsewhere (a value read as HOCON, a
    list or an object, can make a later line fail): the text parses with it a plain word."""
    firsts = list({fill.name: fill for fill in reversed(replaced)}.values())[::-1]

    def parses_with_plain(count: int) -> bool:      # the first ``count`` variables made plain words
        return _parses(text, {**variables, **{fill.name: "x" for fill in firsts[:count]}}, given, environ)

    if not firsts or not parses_with_plain(len(firsts)):
        return None
    # Bisect for the fewest first variables that, made plain, let the text parse: the last of them
    # breaks it. log2(n) parses, every variable considered (once: the first 16, a parse each).
    fails, passes = 0, len(firsts)
    while passes - fails > 1:
        middle = (fails + passes) // 2
        fails, passes = (fails, middle) if parses_with_plain(middle) else (middle, passes)
    return firsts[passes - 1]


def _parses(text: str, variables: dict[str, str], given: bool, environ: Mapping[str, str]) -> bool:
    try:     # with the job's environment: a name it falls back to is no fault of a variable
        parse(_substitute(text, variables, given)[0], apart=PLUGIN_SECTIONS, environ=environ)
    except (HoconError, JobTextError):
        return False
    return True


def _written_offset(at: int, replaced: "list[Filled] | _Shifts") -> int:
    """An offset in the filled text -> in the text as written (inside a filled value: its ``${``)."""
    return (replaced if isinstance(replaced, _Shifts) else _Shifts(replaced)).written(at)


class _Shifts:
    """The fills' starts and the shift before each, for ``_written_offset`` by bisection: a walk of
    every fill per key cost keys x variables (8,000 keys and one multi-line value: 27 s)."""

    def __init__(self, replaced: list[Filled]):
        self.replaced = replaced
        self.starts = [fill.start for fill in replaced]
        self.shifts = list(itertools.accumulate((fill.delta for fill in replaced), initial=0))

    def written(self, at: int) -> int:
        i = bisect.bisect_right(self.starts, at) - 1      # the last fill starting at or before ``at``
        if i >= 0 and at < self.replaced[i].end:
            return self.replaced[i].written
        return at - self.shifts[i + 1]

    def touches(self, start: int, end: int) -> bool:
        """Whether ``filled[start:end]`` overlaps a fill (the fills are in order and apart)."""
        i = bisect.bisect_left(self.starts, end) - 1
        return i >= 0 and start < self.replaced[i].end


def _as_written(spans: Mapping[tuple[str, ...], list[Span]], replaced: list[Filled]):
    """Spans in the filled text -> spans in the text as written; one that touches a filled-in
    variable is dropped (the text as written holds ``${name}`` there, not the value)."""
    out: dict[tuple[str, ...], tuple[Span, ...]] = {}
    shifts = _Shifts(replaced)
    for path, found in spans.items():
        kept = []
        for span in found:
            if shifts.touches(span.start, span.end):
                continue
            at = _written_offset(span.start, shifts)
            kept.append(Span(at, at + span.end - span.start, span.quote))
        if kept:
            out[path] = tuple(kept)
    return out


def _key_lines(lines: Mapping[tuple[str, ...], int]) -> KeyLines:
    keys: KeyLines = {}
    for path, line in lines.items():
        if path[0] == "env" and len(path) > 1:
            keys[("env", dotted(path[1:]))] = line
        elif path[0] in PLUGIN_SECTIONS and len(path) > 2 and path[1].startswith(BLOCK_MARK):
            section, index = unmark(path[1])
            keys[(f"{section}[{index}]", dotted(path[2:]))] = line
    return keys


def dotted(path: tuple[str, ...]) -> str:
    """("rules", "field_rules", "[0]", "field_name") -> "rules.field_rules[0].field_name"."""
    out = ""
    for key in path:
        out += key if key.startswith("[") or not out else "." + key
    return out


def variable_defaults(text: str, variables: Mapping[str, str]) -> dict[str, set[str]]:
    """The defaults the variables not given took (``${tenant:ACME-9931}``), as written and unquoted: the
    value the job runs with, as a given one's is (the masker's ``secrets_of``)."""
    found: dict[str, set[str]] = {}
    for match in VARIABLE.finditer(text, 0, text.rfind("}") + 1):
        name, default = match.group(1), match.group(2)
        if default and name not in variables and name not in SINK_PLACEHOLDERS:
            found.setdefault(name, set()).update({default, default.strip().strip("\"'")} - {""})
    return found


def _substitute(text: str, variables: dict[str, str], given: bool) -> tuple[str, list[Filled]]:
    """``substitute``, and where it filled in, by the row's rule (``config.filling``: ``given``, the values
    written as given; else pasted raw, as a row stored before the rule was); ``JobTextError`` for a value a
    \"\"\" string cannot hold."""
    try:
        return fill(text, variables, given)
    except Unfillable as exc:
        name, line = exc.fill.name, text.count("\n", 0, exc.fill.written) + 1
        raise _value_error(name, line, f"cannot stand inside the \"\"\"triple-quoted\"\"\" string on line {line}: "
                           f"with the quotes around it, it would close the string (a triple-quoted string has no "
                           f"escapes). Write ${{{name}}} in a \"...\" string or outside quotes, where any value is "
                           f"escaped") from None


def unmark(key: str) -> tuple[str, int] | None:
    """``__seatide_block_source_2`` -> ("source", 2)."""
    if not key.startswith(BLOCK_MARK):
        return None
    section, _, index = key[len(BLOCK_MARK):].rpartition("_")
    return section, int(index)


def flatten(block: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted path -> value for every leaf; an object is also kept under its own path."""
    flat: dict[str, Any] = {}
    for key, value in block.items():
        path = f"{prefix}{key}"
        flat[path] = value
        if isinstance(value, Mapping):
            flat.update(flatten(value, path + "."))
    return flat


def names_listed(value: Any) -> list[str] | None:
    """A list of names as an option gives it: a list, or one string of names between commas
    (``secret.variables = "tenant, region_key"``); None for anything else. plugin/options.py's
    list of strings reads it so, and the masker reads ``secret.variables`` with it too."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list):
        return [str(item) for item in value]
    return None
