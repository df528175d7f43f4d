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
``-i`` variable cannot be rewritten in the text: it is refused in both modes. A JSON job file is rewritten
the same way, in place (the parser records where each value of an object in a list is written).
"""

from __future__ import annotations

import json
import os
import re

from seatide.config.job import ConfigError, JobConfig, PluginSpec
from seatide.config.job_text import unmark

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
    rewrites = []
    for spec, option, value in relative_paths(job):
        span = _span(spans, spec.index, option)
        if paths_from is None or span is None:
            raise ConfigError(job.source_name, _refusal(option, value, span is None), plugin=spec.label,
                              option=option, line=spec.line)
        rewrites.append((span, _placed(value, paths_from)))
    for span, placed in sorted(rewrites, key=lambda r: r[0].start, reverse=True):    # from the end: offsets hold
        text = text[:span.start] + json.dumps(placed) + text[span.end:]
    return text


def _span(spans, index: int, option: str):
    """Where sink ``index``'s ``option`` is written: in a block (``sink { LocalFile { path = ... } }``) or in
    SeaTunnel's JSON form (``"sink": [{"path": ...}]``); None when a variable made it (no text to rewrite)."""
    for path, found in spans.items():
        if len(path) == 3 and path[0] == "sink" and path[2] == option and (
                unmark(path[1]) == ("sink", index) or path[1] == f"[{index}]"):
            return found[-1]
    return None


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
