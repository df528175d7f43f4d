"""Declared plugin options: each option is declared once, with its type, default and doc.

A plugin lists its options as ``Option`` values. Validation (``read_options``) turns
the plugin's raw config block into an ``Options`` mapping or raises ``OptionError``
naming the option and what is wrong with it. Option keys are dotted (``row.num``);
HOCON turns ``row.num = 1`` into nested objects, so lookup walks both forms.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from seatide.config.job_text import flatten, names_listed  # noqa: F401  config's: a job tree's dotted keys


class OptionError(ValueError):
    """A plugin option is missing, unknown or of the wrong type."""

    def __init__(self, option: str, message: str):
        super().__init__(message)
        self.option = option
        self.message = message


class _Required:
    def __repr__(self) -> str:
        return "<required>"


REQUIRED: Any = _Required()


def kind_of(value: Any) -> str:
    """What a config value is, in the words of a job file (not Python's class names)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    return "a list" if isinstance(value, list) else "an object" if isinstance(value, Mapping) else type(value).__name__


def _describe(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else f'"{value}"'
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class OptionType:
    """A value type: a name for messages and a function that coerces or raises ValueError."""

    name: str
    coerce: Callable[[Any], Any]

    def __call__(self, value: Any) -> Any:
        return self.coerce(value)


def _int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, int):
        # A plain int, not the parser's number-as-written (HoconInt): C code that takes only an
        # exact int refuses a subclass (getaddrinfo's port: redis-py 8 hands it the port as given).
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        return int(value.strip())
    raise ValueError


def _float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return float(value.strip())
    raise ValueError


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError


def _str(value: Any) -> str:
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    raise ValueError


def _str_list(value: Any) -> list[str]:
    if isinstance(value, list):
        return [_str(item) for item in value]
    listed = names_listed(value)       # "a, b": one string, its names between commas
    if listed is None:
        raise ValueError
    return listed


def _mapping(value: Any) -> dict:
    if isinstance(value, Mapping):
        return _plain(value)
    raise ValueError


def _list(value: Any) -> list:
    if isinstance(value, list):
        return _plain(value)
    raise ValueError


def _any(value: Any) -> Any:
    return _plain(value)


def _plain(value: Any) -> Any:
    """A copy of a parsed value in plain dicts and lists: a plugin's own, to change at will."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


INT = OptionType("integer", _int)
FLOAT = OptionType("number", _float)
BOOL = OptionType("boolean (true or false)", _bool)
STRING = OptionType("string", _str)
STRING_LIST = OptionType("list of strings", _str_list)
OBJECT = OptionType("object", _mapping)
LIST = OptionType("list", _list)
ANY = OptionType("value", _any)


def enum(*choices: str) -> OptionType:
    upper = {c.upper(): c for c in choices}

    def coerce(value: Any) -> str:
        text = _str(value).strip()
        if text.upper() not in upper:
            raise ValueError
        return upper[text.upper()]

    return OptionType("one of " + ", ".join(choices), coerce)


@dataclass(frozen=True)
class Option:
    """One declared option: ``key`` is the dotted name users write."""

    key: str
    type: OptionType
    default: Any = None
    doc: str = ""
    aliases: tuple[str, ...] = ()

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def names(self) -> tuple[str, ...]:
        return (self.key, *self.aliases)


@dataclass(frozen=True)
class UnknownOption:
    """A key no declared option claims, kept (not raised) when options are read leniently."""

    key: str                 # dotted, as written ("colour", "schema.colour")
    closest: str | None      # the most similar declared option name, if any is similar

    def describe(self) -> str:
        hint = f" (did you mean '{self.closest}'?)" if self.closest else ""
        return f"unknown option '{self.key}' ignored{hint}"


class KeyCheck:
    """Checks the keys of blocks nested in an option's value (an Assert rule, a schema column,
    a FakeSource row, a JsonPath column) by the rule top-level options follow: a key nobody
    reads is a load warning naming the closest known key (SeaTunnel ignores it), or, under
    strict mode, an ``OptionError``. Warnings go to ``into`` (a plugin's ``notices``)."""

    def __init__(self, strict: bool = False, into: list | None = None):
        self.strict = strict
        self.unknown: list = into if into is not None else []

    def __call__(self, block: Mapping[str, Any], known: Iterable[str], where: str) -> None:
        """``where`` is the block's path as a user reads it (``rules.field_rules[0]``); an
        unknown key is named by its full path, whose line the loader knows."""
        known = list(known)
        for key in block:
            if key in known:
                continue
            path, closest = f"{where}.{key}", closest_name(str(key), known)
            if self.strict:
                hint = f"; did you mean '{closest}'?" if closest else ""
                raise OptionError(path, f"unknown key '{path}'{hint} (known keys there: {', '.join(known)})")
            self.unknown.append(UnknownOption(path, closest))


@dataclass(frozen=True)
class OptionNotice:
    """A value a plugin accepts but runs differently from SeaTunnel, said as a load warning."""

    key: str
    message: str

    def describe(self) -> str:
        return self.message


class Options(Mapping[str, Any]):
    """Validated option values of one plugin, defaults filled in.

    ``unknown`` lists the keys nobody declared, in the order written (lenient reads only).
    """

    def __init__(self, values: dict[str, Any], given: set[str],
                 unknown: tuple[UnknownOption, ...] = ()):
        self._values = values
        self._given = given
        self.unknown = unknown

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def given(self, key: str) -> bool:
        """True when the user wrote the option (as opposed to its default)."""
        return key in self._given

    def __repr__(self) -> str:
        return f"Options({self._values!r})"


def read_options(block: Mapping[str, Any], declared: Iterable[Option],
                 ignore: Iterable[str] = (), strict: bool = True) -> Options:
    """Validate a raw config block against declared options.

    Raises ``OptionError`` for the first missing or mistyped option, and, when ``strict``,
    for the first unknown one; otherwise unknown keys are returned in ``Options.unknown``
    (SeaTunnel ignores keys it does not know, and real job files carry some).
    ``ignore`` names keys handled elsewhere (plugin links such as ``plugin_output``).
    """
    declared = list(declared)
    flat = flatten(block)
    values: dict[str, Any] = {}
    given: set[str] = set()
    covered: set[str] = set(ignore)
    for option in declared:
        name = next((n for n in option.names() if n in flat), None)
        if name is None:
            if option.required:
                raise OptionError(option.key, f"required option '{option.key}' is missing"
                                  + (f" ({option.doc})" if option.doc else ""))
            values[option.key] = option.default
            continue
        raw = flat[name]
        covered.add(name)
        try:
            values[option.key] = option.type(raw)
        except (ValueError, TypeError):
            raise OptionError(option.key, f"option '{name}' must be {option.type.name}, "
                              f"got {_describe(_plain(raw))}") from None
        given.add(option.key)
    unknown: list[UnknownOption] = []
    for path, value in flat.items():
        if isinstance(value, Mapping) and value:
            continue  # an intermediate object; its leaves are checked
        if not _is_covered(path, covered):
            closest = closest_name(path, [n for o in declared for n in o.names()])
            if strict:
                known = ", ".join(sorted(o.key for o in declared)) or "none"
                hint = f"; did you mean '{closest}'?" if closest else ""
                raise OptionError(path, f"unknown option '{path}'{hint} (known options: {known})")
            unknown.append(UnknownOption(path, closest))
    return Options(values, given, tuple(unknown))


def closest_name(name: str, known: Iterable[str]) -> str | None:
    """The known name most like ``name`` (a typo's intended option), or None."""
    known = list(known)
    match = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if not match:   # compare case-insensitively too: SeaTunnel users mix camelCase and snake_case
        lowered = {k.lower().replace("_", "").replace("-", ""): k for k in known}
        key = name.lower().replace("_", "").replace("-", "")
        match = [lowered[m] for m in difflib.get_close_matches(key, list(lowered), n=1, cutoff=0.6)]
    return match[0] if match else None


def _is_covered(path: str, covered: set[str]) -> bool:
    # Keys inside an object-valued option (``schema.fields.id``) belong to that option.
    return path in covered or any(path.startswith(c + ".") for c in covered if c)


def option_table(declared: Iterable[Option]) -> list[tuple[str, str, str, str]]:
    """(key, type, default, doc) rows, for `seatide plugins` and docs."""
    rows = []
    for option in declared:
        default = "required" if option.required else repr(option.default)
        rows.append((option.key, option.type.name, default, option.doc))
    return rows


__all__ = [
    "ANY", "BOOL", "FLOAT", "INT", "LIST", "OBJECT", "REQUIRED", "STRING", "STRING_LIST",
    "KeyCheck", "Option", "kind_of", "OptionError", "OptionType", "Options", "UnknownOption", "closest_name", "enum",
    "flatten", "option_table", "read_options", "plain",
]

plain = _plain
