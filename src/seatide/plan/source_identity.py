"""What a source is, for its pipeline's fingerprint (``plan.dag.Pipeline.fingerprint``): its options
as the loader reads them, not as the job file spells them.

The same job may come back for a resume written another way: in SeaTunnel's JSON form (each block
naming its ``plugin_name``, what ``seatunnel --encrypt/--decrypt`` prints), with dotted keys nested or
not, an alias for an option's name, ``"4"`` for ``4``, its options shaded or in clear. None of that is
a change of the source, and a fingerprint over the spelling made every pipeline of such a resume
"changed": refused, or under ``--fallback fresh`` a FINISHED pipeline started over, its sink given
every row again.

So a source's identity is: each declared option it gives, under the option's own name, with the
value its type reads (an unknown key as written), without

- its links and parallelism (``plugin_name`` too): how it is wired, not what it reads;
- its table lists where its offsets name their tables (``Source.table_list_options``);
- its credentials (``config.shade.SENSITIVE_OPTIONS``): who reads, not what is read. Their value is
  left out rather than decrypted because an aes256 value cannot be read where a resume is checked
  (a coordinator holds no key: ``intents._load``), and the fingerprint must be the same in every
  process; a rotated password is no reason to refuse a checkpoint either.

Other options a ``shade.options`` covers count by their value in clear under a base64 shade (read
anywhere without a key). Under aes256 they count as written: the same value encrypts to the same
text under one key (``config.shade._synthetic_nonce``), but a job given such an option in clear once
and encrypted once is seen as changed; a real change of it (another host) must never go unseen.
"""

from __future__ import annotations

from typing import Any, Mapping

from seatide.config.job import PluginSpec
from seatide.config.job_text import flatten
from seatide.config.shade import SENSITIVE_OPTIONS, Shade, ShadeError
from seatide.plugin.registry import lookup

# The rule this module is, named in every fingerprint it makes (``Pipeline.fingerprint``: "v2:<digest>";
# "v1" was the block as written, ``Pipeline._written_fingerprints``, stored unprefixed). The identity
# reads each plugin's declared options (names, aliases, types), so a release that declares an option
# or alias, or changes a type, changes the digest of the same text: such a release must name a new
# version here and keep this rule (the declarations as they are now) for "v2:" fingerprints in
# ``Pipeline.fits``, or its upgrade refuses every checkpoint written before it.
IDENTITY_VERSION = "v2"

# Keys that wire a plugin into its job, in every spelling the loader accepts (config.loader.LINK_OPTIONS).
WIRING = ("plugin_output", "result_table_name", "plugin_input", "source_table_name", "parallelism",
          "plugin_name")


def source_identity(spec: PluginSpec) -> tuple[str, dict[str, Any]]:
    """(the source's plugin name, its options as read) of one source block."""
    cls = plugin_class(spec)
    block = dict(spec.block)
    shade = getattr(spec, "shade", None)
    if shade is not None and shade.identifier == "base64":
        block = shade.reveal(block, spec.label)      # checked when the job was loaded
    flat = flatten(block)
    left_out = {*WIRING, *SENSITIVE_OPTIONS, *table_lists(spec)}
    options: dict[str, Any] = {}
    read: set[str] = set()
    for option in getattr(cls, "options", ()):
        name = next((n for n in option.names() if n in flat), None)
        if name is None:
            continue
        read.add(name)
        if option.key in left_out:
            continue
        try:
            options[option.key] = option.type(flat[name])
        except (ValueError, TypeError):     # not loadable as it is; as written, then
            options[option.key] = flat[name]
    for path, value in flat.items():
        if (isinstance(value, Mapping) and value) or _under(path, read | left_out):
            continue
        options[path] = value
    return (cls.plugin_name if cls is not None else spec.name), options


def plugin_class(spec: PluginSpec):
    return type(spec.plugin) if spec.plugin is not None else lookup("source", spec.name)


def table_lists(spec: PluginSpec) -> tuple[str, ...]:
    return getattr(plugin_class(spec), "table_list_options", ())


def _under(path: str, keys: set[str]) -> bool:
    return any(path == key or path.startswith(key + ".") for key in keys)


def base64_forms(sources: list[PluginSpec]) -> list[list[dict]]:
    """The sources' blocks as written, and as the version before may have seen them written: a job
    under a base64 shade with its shaded options in clear (it was encrypted since), a job in clear with
    the options a base64 shade covers (its credentials, ``shade.options`` if kept) encrypted (it was
    decrypted since). Base64 reads anywhere; aes256 needs a key a resume's check does not hold."""
    forms = [[dict(s.block) for s in sources]]
    shade = next((s.shade for s in sources if s.shade is not None), None)
    try:
        if shade is not None and shade.identifier == "base64":
            forms.append([shade.reveal(s.block, s.label) for s in sources])
        elif shade is None or not shade.active:
            hidden = Shade("base64", shade.options if shade is not None else SENSITIVE_OPTIONS)
            forms.append([hidden.hide(s.block, s.label) for s in sources])
    except ShadeError:      # an option it covers is no string: the job was never shaded so
        pass
    return forms
