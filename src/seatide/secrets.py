"""Secrets in job configs: which values are secret, and masking them in what SeaTide shows.

A value is secret when the option holding it is named like a credential (``is_secret_key``)
or when it is the value of a variable the job marks secret (``secret.variables`` in ``env``,
or a variable whose own name is credential-like). The rule, and why each part is there,
is in docs/security.md.

The store keeps a job's config and variables in clear: drivers need them to connect. What
leaves the store is masked: API answers, ``seatide status``, events and stored error
messages (masked where they are written, by the process that knows the job's secrets), the
driver's log lines, and the config text wherever it is shown.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from typing import Any, Iterable, Mapping

MASK = "******"

# A name holding one of these words holds a credential ...
_SECRET_WORDS = frozenset({"password", "passwd", "pwd", "passphrase", "secret", "token", "credential",
                           "credentials", "jaas"})
# ... unless its last word says it is *about* a secret: where it is, what kind, its name.
_DESCRIPTIVE = frozenset({"provider", "class", "type", "mode", "path", "file", "location", "name", "names",
                          "id", "url", "uri", "enabled", "variables", "column", "columns", "field", "fields",
                          "length", "size", "format", "timeout", "expire", "ttl"})
# ``key`` is a credential only as a whole name or after one of these words; ``partition_key``,
# ``sort_key``, ``primary_keys``, ``key_column``, ``rowkey_column`` name columns, not secrets.
_KEY_QUALIFIERS = frozenset({"access", "secret", "private", "api", "auth", "client", "encryption", "encrypt",
                             "decrypt", "signing", "sign", "master", "account", "app", "shared", "session",
                             "ssh", "aes", "des", "hmac", "license"})
# Blocks that declare columns and their types: a column may be called ``password``.
_NOT_OPTIONS = frozenset({"schema"})
# Shorter values are masked where they are an option's value, but not searched for inside
# free text: masking every "abc" in a message would make the message unreadable.
MIN_SEARCHED = 4

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_URL_USERINFO = re.compile(r"(?P<pre>://[^/\s:@]+:)(?P<value>[^/\s@]+)(?P<post>@)")
_URL_PARAM = re.compile(r"(?P<pre>[?&;](?P<key>[A-Za-z][\w.\-]*)=)(?P<value>[^&;\s\"'#]+)(?P<post>)")
_INLINE_PAIR = re.compile(r"""(?P<key>[A-Za-z][\w.\-]*)(?P<sep>["']?\s*[=:]\s*)(?P<q>["']?)(?P<value>[^\s&;,'"}\])]+)""")


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(name)]


def is_secret_key(name: str) -> bool:
    """Whether an option (or variable) named ``name`` holds a credential.

    ``name`` may be dotted (``fs.s3a.secret.key``) or camelCase (``accessKeySecret``)."""
    words = _words(name)
    if not words or words[-1] in _DESCRIPTIVE:
        return False
    if any(w in _SECRET_WORDS for w in words):
        return True
    if words[-1] == "key":
        return len(words) == 1 or words[-2] in _KEY_QUALIFIERS
    return words[-1] == "auth"      # Redis' ``auth`` is its password


def secret_variable_names(env: Mapping[str, Any] | None, variables: Mapping[str, str]) -> set[str]:
    """Variables whose values are secret: listed in ``secret.variables``, or named like a credential."""
    from seatide.plugin.options import flatten

    listed = flatten(env or {}).get("secret.variables") or []
    names = {str(n) for n in listed} if isinstance(listed, list) else {str(listed)}
    return names | {name for name in variables if is_secret_key(name)}


def secret_values(text: str, variables: Mapping[str, str] | None = None) -> frozenset[str]:
    """Every secret value of a job: options named like credentials (after variables are
    filled in) and the values of its secret variables. A config that does not parse still
    has its credential-named variables found."""
    variables = dict(variables or {})
    return _values_of(_tree(text, variables), variables)


def _values_of(tree: dict | None, variables: dict[str, str]) -> frozenset[str]:
    found: set[str] = set()
    if tree is not None:
        _collect(tree, [], found)
    env = tree.get("env") if tree else None
    names = secret_variable_names(env if isinstance(env, Mapping) else None, variables)
    found |= {str(variables[n]) for n in names if n in variables}
    return frozenset(v for v in found if v)


def mask_message(message: str | None, values: Iterable[str]) -> str | None:
    """``message`` with every secret value, URL password and ``password=...`` pair masked."""
    if not message:
        return message
    for value in sorted(values, key=len, reverse=True):
        if len(value) >= MIN_SEARCHED:
            message = message.replace(value, MASK)
    return _INLINE_PAIR.sub(_mask_pair, _mask_embedded(message))


def mask_config_text(text: str, variables: Mapping[str, str] | None = None) -> str:
    """The job file's text as written, comments and layout kept, with every secret value
    replaced by ``******``. A file that does not parse has the values of credential-named
    keys masked line by line instead."""
    variables = dict(variables or {})
    tree = _tree(text, variables)
    values = _values_of(tree, variables)
    if tree is None:
        return mask_message(text, values)
    text = _mask_embedded(text)
    for value in sorted(values, key=len, reverse=True):
        for written in {value, json.dumps(value)[1:-1]}:
            text = _whole_value(written).sub(lambda m: m.group("pre") + m.group("q") + MASK + m.group("q"), text)
            if len(written) >= MIN_SEARCHED:
                text = text.replace(written, MASK)
    return text


class MaskingFilter(logging.Filter):
    """A log handler filter that masks a job's secrets in every line, tracebacks included."""

    def __init__(self, values: Iterable[str]):
        super().__init__()
        self.values = frozenset(values)

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = mask_message(record.getMessage(), self.values), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask_message(record.exc_text, self.values)
        return True


def _tree(text: str, variables: dict[str, str]) -> dict | None:
    """The job's parsed tree, read-only: only read here (``_collect``, ``_values_of``)."""
    return _parsed(text, tuple(sorted(variables.items())))


@functools.lru_cache(maxsize=512)
def _parsed(text: str, variables: tuple[tuple[str, str], ...]) -> dict | None:
    # Parsing HOCON takes milliseconds to a tenth of a second; job-info masks the same stored
    # config on every request (twice), so a job's tree is parsed once per process, not per read.
    from seatide.config.loader import ConfigError, parse_job_tree

    try:
        return parse_job_tree(text, dict(variables))
    except ConfigError:
        return None


def _collect(node: Any, path: list[str], found: set[str]) -> None:
    if isinstance(node, Mapping):
        for key, value in node.items():
            if str(key) not in _NOT_OPTIONS:
                _collect(value, [*path, str(key)], found)
    elif isinstance(node, list):
        for item in node:
            _collect(item, path, found)
    elif node is not None and not isinstance(node, bool):
        # The last few keys together: HOCON nests ``fs.s3a.secret.key`` as four objects.
        if is_secret_key(".".join(path[-4:])):
            found.add(str(node))
        elif isinstance(node, str):
            found.update(m.group("value") for m in _embedded(node))


def _embedded(text: str) -> Iterable[re.Match]:
    """Credentials inside a value: a URL's password, a ``password=...`` query parameter."""
    yield from _URL_USERINFO.finditer(text)
    yield from (m for m in _URL_PARAM.finditer(text) if is_secret_key(m.group("key")))


def _whole_value(value: str) -> re.Pattern:
    """``value`` as the whole value of an assignment or a list item, quoted or not."""
    return re.compile(r"(?P<pre>[=:\[,]\s*)(?P<q>\"?)" + re.escape(value) + r"(?P=q)(?=\s*(?:[,}\]\r\n#]|//|$))")


def _mask_embedded(text: str) -> str:
    masked = lambda m: m.group("pre") + MASK + m.group("post")      # noqa: E731
    text = _URL_USERINFO.sub(masked, text)
    return _URL_PARAM.sub(lambda m: masked(m) if is_secret_key(m.group("key")) else m.group(0), text)


def _mask_pair(match: re.Match) -> str:
    # A lone "key" in prose ("duplicate key: 5") is rarely a credential; in an option it is.
    key = match.group("key")
    if not is_secret_key(key) or _words(key) == ["key"] or match.group("value") == MASK:
        return match.group(0)
    return key + match.group("sep") + match.group("q") + MASK
