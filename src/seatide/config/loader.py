"""Job files -> a validated ``JobConfig``, or one clear ``ConfigError``.

Everything a job file can get wrong is caught here, before Spark starts: unparsable
text, undefined variables, unknown sections or plugins, wrong types, missing options, and
(via ``seatide.plan``) links that name nothing, cycles and unread outputs. Unknown option
keys are warnings (``JobConfig.warnings``), as SeaTunnel ignores them, unless the load is
strict (``--strict`` or ``env { strict = true }``).
"""

from __future__ import annotations

import difflib
from typing import Any, Mapping

from seatide.config.env import JobEnv, read_env
from seatide.config.job import ConfigError, ConfigWarning, JobConfig, PluginSpec  # the job model, its own module (config/job.py)
from seatide.config.job_environment import how_to_define, split
from seatide.config.job_text import SECTIONS, BlockSite, JobText, JobTextError, KeyLines, read_job_text, unmark
from seatide.config.shade import Shade, ShadeError, read_shade
from seatide.plugin.base import Plugin
from seatide.plan.catalog import build_sink, check_change_keys, sink_tables
from seatide.plan.dag import check_links
from seatide.plugin.options import INT, STRING, STRING_LIST, Option, OptionError, read_options
from seatide.plugin.registry import lookup, names


# Keys every plugin understands: how plugins are linked, and a per-plugin parallelism.
LINK_OPTIONS: tuple[Option, ...] = (
    Option("plugin_output", STRING, None, "name other plugins use to read this plugin's output",
           aliases=("result_table_name",)),
    Option("plugin_input", STRING_LIST, None, "names of the outputs this plugin reads",
           aliases=("source_table_name",)),
    Option("parallelism", INT, None, "overrides env.parallelism for this plugin"),
    Option("plugin_name", STRING, None, "the plugin, in JSON job files"),
)
_LINK_KEYS = {name for option in LINK_OPTIONS for name in option.names()}


def load_job_file(path: str, variables: dict[str, str] | None = None, strict: bool = False) -> JobConfig:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ConfigError(path, f"cannot read the job file: {exc.strerror or exc}") from None
    return load_job_text(text, variables, source_name=path, strict=strict)


def load_job_text(text: str, variables: dict[str, str] | None = None,
                  source_name: str = "<job>", strict: bool = False, runs_here: bool = True) -> JobConfig:
    """Parse and validate a job. Unknown option keys are warnings (``JobConfig.warnings``)
    unless ``strict`` or ``env { strict = true }``, which make the first one an error.

    Options encrypted under ``shade.identifier`` are decrypted before validation; with
    ``runs_here`` false (a submission checked by a process that will not run the job) an
    aes256 value is only checked, never decrypted (``seatide.config.shade``)."""
    parsed = _parse(text, variables or {}, source_name)
    tree, keys = parsed.tree, parsed.keys
    unknown = [k for k in tree.keys() if k not in SECTIONS]
    if unknown:
        raise ConfigError(source_name, f"unknown section '{unknown[0]}' "
                          f"(a job has {', '.join(SECTIONS)})")
    env_block = tree.get("env", {}) or {}
    try:
        shade = read_shade(env_block, runs_here=runs_here)
    except ShadeError as exc:
        raise ConfigError(source_name, str(exc), plugin="env", option=exc.option,
                          line=keys.get(("env", exc.option))) from None
    try:
        env = read_env(env_block, strict=strict)
    except OptionError as exc:
        raise ConfigError(source_name, exc.message, plugin="env", option=exc.option,
                          line=keys.get(("env", exc.option))) from None
    reading = _Reading(source_name, env, shade, parsed.sites, keys)
    reading.warnings += [ConfigWarning(source_name, "env", keys.get(("env", u.key)), u) for u in env.unknown]
    specs = {kind: reading.section(tree.get(kind), kind) for kind in ("source", "transform")}
    # Sinks last: each gets the catalog of the table it receives (plan.catalog).
    reading.upstream = (specs["source"], specs["transform"])
    specs["sink"] = reading.section(tree.get("sink"), "sink")
    if not specs["source"]:
        raise ConfigError(source_name, "the job has no source: add a source { ... } block")
    if not specs["sink"]:
        raise ConfigError(source_name, "the job has no sink: add a sink { ... } block")
    job = JobConfig(source_name, text, env, specs["source"], specs["transform"], specs["sink"],
                    warnings=reading.warnings, env_block=env_block, parsed=parsed)
    check_links(job)
    return job


def load_job_outline(text: str, variables: dict[str, str] | None = None,
                     source_name: str = "<job>") -> tuple[dict, list[PluginSpec]]:
    """The env block as written and each plugin with its links, no plugin instantiated.

    For reads of a job that was validated when it was submitted (its DAG in an API
    answer): nothing is decrypted, no database is reached, no SQL is parsed.
    """
    parsed = _parse(text, variables or {}, source_name)
    tree = parsed.tree
    reading = _Reading(source_name, None, None, parsed.sites, parsed.keys)
    specs = []
    for kind in ("source", "transform", "sink"):
        for index, (name, body, line) in enumerate(reading.entries(tree.get(kind), kind)):
            links = read_options({k: v for k, v in body.items() if k in _LINK_KEYS}, LINK_OPTIONS)
            specs.append(PluginSpec(kind=kind, index=index, name=name, line=line, output=links["plugin_output"],
                                    inputs=links["plugin_input"] or [], plugin=None, block=dict(body)))
    return tree.get("env") or {}, specs


def load_job_env(text: str, variables: dict[str, str] | None = None) -> JobEnv:
    """Only the env block of a job (no plugins loaded): what a driver's SparkSession needs."""
    return read_env(_parse(text, variables or {}, "<job>").tree.get("env", {}) or {})


def parse_job_tree(text: str, variables: dict[str, str] | None = None) -> dict:
    """The job's parsed tree, variables filled in, nothing validated (plugin blocks under
    unique keys, so two blocks of one plugin stay apart); ``ConfigError`` if it does not parse."""
    return _parse(text, variables or {}, "<job>").tree


def job_as_json(text: str, variables: dict[str, str] | None = None, source_name: str = "<job>") -> dict:
    """The job in SeaTunnel's JSON form, nothing validated: each plugin section a list of
    blocks naming their ``plugin_name``, so two blocks of one plugin and their order survive
    a round trip through JSON (``ConfigError`` if the text does not parse)."""
    parsed = _parse(text, variables or {}, source_name)
    tree, sites = parsed.tree, parsed.sites
    out = dict(tree)
    for kind in ("source", "transform", "sink"):
        section = tree.get(kind)
        if isinstance(section, Mapping):
            out[kind] = [{"plugin_name": sites[unmark(key)].name if unmark(key) in sites else key, **body}
                         for key, body in section.items()]
    return out


def spark_conf_for(env: JobEnv) -> dict[str, str]:
    return {"spark.sql.streaming.minBatchesToRetain": str(env.checkpoints_retained), **env.spark_conf}


def _parse(text: str, variables: dict[str, str], source_name: str) -> JobText:
    try:
        return read_job_text(text, variables)
    except JobTextError as exc:
        if exc.undefined:
            # A job recorded with its submitter's environment reads no other (config/job_environment.py).
            recorded = split(variables)[1] is not None
            raise ConfigError(source_name, f"variable ${{{exc.undefined}}} is not defined: "
                              + how_to_define(exc.undefined)
                              + ("; an environment variable is read from the submitting command's environment, "
                                 "never from a coordinator's or a driver's" if recorded else ""),
                              line=exc.line) from None
        raise ConfigError(source_name, f"cannot parse the file: {exc.reason}", line=exc.line) from None


class _Reading:
    """One load's plugin sections: where keys are (for messages) and the warnings so far."""

    def __init__(self, source_name: str, env: JobEnv, shade: Shade, sites: dict, keys: KeyLines):
        self.source_name, self.env, self.shade, self.sites, self.keys = source_name, env, shade, sites, keys
        self.warnings: list[ConfigWarning] = []
        self.upstream: tuple[list[PluginSpec], list[PluginSpec]] = ([], [])   # sources, transforms

    def section(self, block: Any, kind: str) -> list[PluginSpec]:
        return [self.plugin(kind, i, name, body, line) for i, (name, body, line) in enumerate(self.entries(block, kind))]

    def entries(self, block: Any, kind: str) -> list[tuple[str, Mapping, int | None]]:
        """(plugin name as written, block, line) of each plugin of a section, in file order."""
        source_name = self.source_name
        if block is None:
            return []
        entries: list[tuple[str, Mapping, int | None]] = []
        if isinstance(block, Mapping):
            for key, body in block.items():
                marked = unmark(key)
                site: BlockSite | None = self.sites.get(marked) if marked else None
                name = site.name if site else key
                entries.append((name, body, site.line if site else None))
        elif isinstance(block, list):  # JSON style: [{"plugin_name": "FakeSource", ...}]
            for i, body in enumerate(block):
                if not isinstance(body, Mapping) or "plugin_name" not in body:
                    raise ConfigError(source_name, "each entry needs a \"plugin_name\"",
                                      plugin=f"{kind}[{i}]")
                entries.append((str(body["plugin_name"]), body, None))
        else:
            raise ConfigError(source_name, f"'{kind}' must hold plugin blocks such as "
                              f"{_example(kind)} {{ ... }}")
        return entries

    def plugin(self, kind: str, index: int, name: str, body: Any, line: int | None) -> PluginSpec:
        source_name, env = self.source_name, self.env
        label = f"{kind}[{index}] {name}"
        if not isinstance(body, Mapping):
            raise ConfigError(source_name, f"a plugin block must be an object: {name} {{ ... }}",
                              plugin=label, line=line)
        cls = lookup(kind, name)
        if cls is None:
            known = names(kind)
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" Did you mean {close[0]}?" if close else ""
            raise ConfigError(source_name, f"unknown {kind} plugin '{name}'.{hint} "
                              f"Known {kind} plugins: {', '.join(known)}", plugin=f"{kind}[{index}]",
                              line=line)
        scope = f"{kind}[{index}]"
        try:
            links = read_options({k: v for k, v in body.items() if k in _LINK_KEYS}, LINK_OPTIONS)
            # Decrypted for the plugin only: the block kept in the spec is as written (its fingerprint
            # reads what a source is: plan.source_identity).
            given = self.shade.reveal(body, label) if kind != "transform" else body
            parallelism = links["parallelism"] or env.parallelism
            if parallelism < 1:
                raise OptionError("parallelism", "option 'parallelism' must be at least 1")

            def build(options: Mapping, catalog=None) -> Plugin:
                made = cls(read_options(options, cls.options, ignore=_LINK_KEYS, strict=env.strict), parallelism, env)
                if kind == "sink":
                    made.catalog = catalog     # after construction: sinks may override __init__
                    check_change_keys(made, catalog)
                return made

            if kind == "sink":   # built from the table(s) it receives, placeholders filled (plan.catalog)
                plugin = build_sink(cls, {k: v for k, v in given.items() if k not in _LINK_KEYS},
                                    sink_tables(*self.upstream, links["plugin_input"] or []), build)
            else:
                plugin = build(given)
            opts = plugin.opts
        except (OptionError, ShadeError) as exc:
            message = exc.message if isinstance(exc, OptionError) else str(exc).removeprefix(f"{label}: ")
            raise ConfigError(source_name, message, plugin=label, option=exc.option,
                              line=self.keys.get((scope, exc.option), line)) from None
        self.warnings += [ConfigWarning(source_name, label, self.keys.get((scope, u.key), line), u)
                          for u in (*opts.unknown, *plugin.notices)]
        return PluginSpec(kind=kind, index=index, name=cls.plugin_name, line=line,
                          output=links["plugin_output"], inputs=links["plugin_input"] or [],
                          plugin=plugin, block=dict(body), shade=self.shade)


def _example(kind: str) -> str:
    return {"source": "FakeSource", "transform": "Sql", "sink": "Console"}[kind]


