"""A sink's local paths as the job is recorded: absolute, the same directory for every attempt.

A relative or ``~`` path is resolved where the driver runs (outside review 8b, F8). A cluster runs
the job's driver on a worker, in that worker's directory (and home), and the next attempt or a
resume may run on another worker: one job's output, and the key its save modes are decided under,
would split across directories. Spark resolves such a path where its driver runs too; SeaTide
makes it one place, as the job is recorded:

* for a cluster (``seatide submit``, the REST APIs: ``paths_from`` None) such a path is refused,
  naming the sink, the path and the way on (an absolute path);
* run locally (``seatide run``, ``seatide resume``: the driver runs where the client does) it is
  made absolute against the client's directory (``paths_from``) in the recorded text, the rest of
  the text as written, so every attempt writes, and keys, one directory.

Which options are local paths, each sink says (``Sink.local_path_options``). A path filled in from a
``-i`` variable cannot be rewritten in the text: it is refused in both modes. A JSON job file keeps its
variables as written where it is rewritten (``_json_document``).
"""

from __future__ import annotations

import json
import os
import re

from seatide.config.job import ConfigError, JobConfig, PluginSpec
from seatide.config.job_text import _VARIABLE, unmark

_FILE_SCHEME = re.compile(r"^file:(//)?")


def relative_paths(job: JobConfig) -> list[tuple[PluginSpec, str, str]]:
    """(sink, option, value as given) of every sink path that is relative or starts with ``~``."""
    found = []
    for spec in job.sinks:
        for option in type(spec.plugin).local_path_options:
            value = spec.block.get(option)
            if isinstance(value, str) and not _FILE_SCHEME.sub("", value.strip()).startswith("/"):
                found.append((spec, option, value))
    return found


def placed_text(job: JobConfig, paths_from: str | None) -> str:
    """The job's text with each relative sink path made absolute against ``paths_from``; the text as
    it is when there is none. ``ConfigError`` where ``paths_from`` is None (a cluster) or the path
    came from a variable."""
    text, spans = job.text, (job.parsed.spans if job.parsed is not None else None) or {}
    document, variables = _json_document(text)
    rewrites, set_in_json = [], False
    for spec, option, value in relative_paths(job):
        span = next((found[-1] for path, found in spans.items() if path[0] == "sink" and len(path) == 3
                     and unmark(path[1]) == ("sink", spec.index) and path[2] == option), None)
        in_json = document is not None and _json_sink(document, spec.index).get(option) == value
        if paths_from is None or (span is None and not in_json):
            raise ConfigError(job.source_name, _refusal(option, value, span is None), plugin=spec.label,
                              option=option, line=spec.line)
        if span is None:        # a JSON job file (SeaTunnel's .json form) has no spans: its value is set
            _json_sink(document, spec.index)[option] = _placed(value, paths_from)
            set_in_json = True
        else:
            rewrites.append((span, _placed(value, paths_from)))
    if set_in_json:
        return _variables_back(json.dumps(document, indent=2), variables)
    for span, placed in sorted(rewrites, key=lambda r: r[0].start, reverse=True):    # from the end: offsets hold
        text = text[:span.start] + json.dumps(placed) + text[span.end:]
    return text


def _json_document(text: str) -> tuple[dict | None, dict[str, str]]:
    """The job file as JSON when it is SeaTunnel's JSON form (its sinks a list), else None; with the markers that
    stand in it for its ``${...}`` variables (review of 69dbcb9, F5: the text as written is JSON only once they are
    filled in, and a marker keeps a value made with one from looking literal). Each marker is a string of its
    own where the variable stands outside a string (``"row.num": ${ROWS}``), else part of its string."""
    parts, markers, at, quoted, escaped = [], {}, 0, False, False     # escaped: after a backslash in a string
    nonce = next(f"@@seatide{n}@@" for n in range(len(text) + 1) if f"@@seatide{n}@@" not in text)
    matches = {m.start(): m for m in _VARIABLE.finditer(text)}
    for i, ch in enumerate(text):
        if i < at:
            continue
        if i in matches:
            marker = f"{nonce}{len(markers)}@"
            markers[marker if quoted else json.dumps(marker)] = matches[i].group(0)
            parts.append(marker if quoted else json.dumps(marker))
            at = matches[i].end()
            continue
        parts.append(ch)
        if escaped:
            escaped = False
        elif quoted and ch == "\\":
            escaped = True
        elif ch == '"':
            quoted = not quoted
    try:
        document = json.loads("".join(parts))
    except ValueError:
        return None, {}
    return (document, markers) if isinstance(document, dict) and isinstance(document.get("sink"), list) else (None, {})


def _variables_back(text: str, markers: dict[str, str]) -> str:
    """The dumped document with each variable as written where its marker stands (each ends in ``@``: none is
    the start of another)."""
    for marker in markers:
        text = text.replace(marker, markers[marker])
    return text


def _json_sink(document: dict, index: int) -> dict:
    sinks = document["sink"]
    return sinks[index] if 0 <= index < len(sinks) and isinstance(sinks[index], dict) else {}


def _placed(value: str, base: str) -> str:
    return os.path.normpath(os.path.join(base, os.path.expanduser(_FILE_SCHEME.sub("", value.strip()))))


def _refusal(option: str, value: str, from_variable: bool) -> str:
    home = " (~ is the home directory of whichever machine runs the driver)" if value.strip().startswith("~") else ""
    if from_variable:
        return (f"option '{option}' is {value!r}, a relative path{home} made with a -i variable or a "
                f"substitution; SeaTide records a relative path made absolute, which it cannot do for a value "
                f"built that way: give an absolute path (as the variable's value, -i NAME=/data/out, or in the "
                f"text)")
    return (f"option '{option}' is {value!r}, a relative path{home}: a cluster runs the job's driver on a worker, "
            f"in that worker's directory, and the next attempt may run on another, so the output would split "
            f"across directories. Give an absolute path ({option} = \"/data/out\" or \"file:///data/out\"); "
            f"seatide run makes a relative one absolute against the directory it is started in")


def path_notes(job: JobConfig, here: str) -> list[str]:
    """What ``seatide check`` says of each relative sink path: where ``seatide run`` started in
    ``here`` writes it, and that ``seatide submit`` refuses it."""
    return [f"{spec.label}: option '{option}' is {value!r}, a relative path: seatide run started here writes "
            f"{_placed(value, here)}; "
            f"seatide submit refuses it (a cluster's driver runs in a worker's directory): give an absolute path"
            for spec, option, value in relative_paths(job)]


__all__ = ["path_notes", "placed_text", "relative_paths"]
