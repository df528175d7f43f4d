"""A loaded job as the rest of SeaTide sees it: ``JobConfig``, its ``PluginSpec``s, and the
``ConfigError``/``ConfigWarning`` a user reads.

Its own module, apart from the loader, because the loader builds plugins and checks links
with ``seatide.plan`` while ``plan`` takes these types as its input: with both in one module
config and plan imported each other (a cycle). This module imports nothing of plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from seatide.config.env import JobEnv
    from seatide.config.job_text import JobText
    from seatide.config.shade import Shade
    from seatide.plugin.base import Plugin
    from seatide.plugin.options import OptionNotice, UnknownOption


class ConfigError(Exception):
    """A job file is invalid. ``str()`` is the whole message a user sees: the reason first,
    then where on a line of its own (a job file's absolute path would push the reason off a
    narrow terminal). ``reason`` is the first line alone."""

    def __init__(self, source: str, message: str, plugin: str | None = None,
                 option: str | None = None, line: int | None = None):
        self.source, self.plugin, self.option, self.line = source, plugin, option, line
        self.reason = message
        super().__init__(f"{message}\n  {where(source, plugin, line)}")


def where(source: str, plugin: str | None = None, line: int | None = None) -> str:
    """``in sink[0] Console, line 9 of /jobs/orders.conf``: the second line of a message."""
    if plugin and line:
        return f"in {plugin}, line {line} of {source}"
    if plugin:
        return f"in {plugin} of {source}"
    if line:
        return f"at line {line} of {source}"
    return f"in {source}"


@dataclass(frozen=True)
class ConfigWarning:
    """An unknown key that a lenient load ignored, or a plugin's notice about a value it accepts;
    ``str()`` is what a user sees, laid out as a ``ConfigError`` is."""

    source: str
    plugin: str                # "env" or a plugin label ("sink[0] Console")
    line: int | None           # the key's own line when the scanner saw it, else its block's
    unknown: UnknownOption | OptionNotice

    def __str__(self) -> str:
        return f"{self.unknown.describe()}\n  {where(self.source, self.plugin, self.line)}"


@dataclass
class PluginSpec:
    """One plugin block of a job, validated and instantiated."""

    kind: str
    index: int
    name: str
    line: int | None
    output: str | None
    inputs: list[str]
    plugin: Plugin
    block: dict = field(repr=False, default_factory=dict)
    # The job's shade, for a block kept as written: what a fingerprint reads in clear (plan.source_identity).
    shade: Shade | None = field(repr=False, default=None)

    @property
    def plugin_id(self) -> str:
        return f"{self.kind}[{self.index}]"

    @property
    def label(self) -> str:
        return f"{self.plugin_id} {self.name}"


@dataclass
class JobConfig:
    source_name: str
    text: str
    env: JobEnv
    sources: list[PluginSpec]
    transforms: list[PluginSpec]
    sinks: list[PluginSpec]
    # Unknown keys ignored by a lenient load, in file order; the CLI prints them.
    warnings: list[ConfigWarning] = field(default_factory=list)
    env_block: dict = field(default_factory=dict, repr=False)    # the env block as written
    parsed: JobText | None = field(default=None, repr=False)     # the one parse everything derives from

    @property
    def plugins(self) -> list[PluginSpec]:
        return [*self.sources, *self.transforms, *self.sinks]
