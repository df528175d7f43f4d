"""Secrets in job configs: which values are secret, and masking them in what SeaTide shows.

A value is secret when the option holding it is named like a credential (``is_secret_key``)
or when it is the value of a variable the job marks secret (``secret.variables`` in ``env``,
or a variable whose own name is credential-like), or of the environment recorded with the job. The rule, and why each part is there,
is in docs/security.md.

The store keeps a job's config and variables in clear: drivers need them to connect. What
leaves the store is masked: API answers, ``seatide status``, events and stored error
messages (masked where they are written, by the process that knows the job's secrets), the
driver's log lines, and the config text wherever it is shown.
"""

from __future__ import annotations

import logging
import re
import threading
import traceback
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from seatide.secrets.config_text import mask_comments, mask_defaults, referred_spans
from seatide.secrets.known import MASK, MIN_SEARCHED, is_plain, mask_values
from seatide.secrets.names import is_secret_key, is_secret_param, option_name, words
from seatide.secrets.shapes import password_spans, refusal_spans

if TYPE_CHECKING:
    from seatide.config.job_text import JobText

# Blocks that declare columns and their types: a column may be called ``password``.
_NOT_OPTIONS = frozenset({"schema"})

_URL_USERINFO = re.compile(r"(?P<pre>://[^/\s:@]+:)(?P<value>[^/\s@]+)(?P<post>@)")
_URL_PARAM = re.compile(r"(?P<pre>[?&;](?P<key>[A-Za-z][\w.\-]*)=)(?P<value>[^&;\s\"'#]+)(?P<post>)")
# key=value, key: value, "key": "value", key -> value (Scala's Map in Spark's lines), key => value; the
# quotes may be escaped, once or more (\"key\": \"value\": JSON inside a JSON text). The value is found by _value_end.
# A key starts a token (not after a letter or a dot): tried from inside a long dotted name too, the search took
# seconds on one log line (a 15 KB class path before ``password=x``: 11 s).
_PAIR_HEAD = re.compile(r"""(?<![\w.])(?P<key>[A-Za-z][\w.\-]*)(?P<sep>(?:\\*["'])?\s*(?:->|=>|[=:])\s*)(?P<q>(?:\\*["'])?)""")
_BARE_VALUE = re.compile(r"""[^\s&;,'"}\])]+""")
_CLOSING = {"{": "}", "[": "]"}
# Nothing can be a credential's name without one of these: most texts (log lines) skip the pair scan.
_MAY_NAME_SECRET = re.compile(r"pass|pwd|secret|token|credential|jaas|key|auth|cookie", re.IGNORECASE)
# An Authorization header's value is a scheme and a credential (``Bearer eyJ...``): the credential goes with it.
_AUTH_SCHEMES = frozenset({"basic", "bearer", "digest", "token", "negotiate", "ntlm", "apikey", "oauth", "hoba",
                           "mutual", "aws4-hmac-sha256"})
_SCHEMED = re.compile(r"(?P<scheme>[A-Za-z][\w-]*)[ \t]+(?P<credential>[^\s&;,'\"}\])]+)")
# A cookie header's value is a list of name=value pairs, any of them a session's: to the end of its line (or a
# comma: the next entry of a map, a Set-Cookie's date, which holds none).
_COOKIE_VALUE = re.compile(r"""[^\r\n,'"}\])]*[^\s,'"}\])]""")
# A private key's PEM block, whatever names it (key material in a message, a config's value); PGP's armor
# ("-----BEGIN PGP PRIVATE KEY BLOCK-----") too.
_KEY_KIND = r"[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?"
_PEM_PRIVATE = re.compile(rf"-----BEGIN (?P<kind>{_KEY_KIND})-----.*?(?:-----END (?P=kind)-----|\Z)", re.DOTALL)
_PEM_BEGIN = re.compile(rf"-----BEGIN (?P<kind>{_KEY_KIND})-----")
# What a line inside a key block can be: base64 (PGP's "=sum" too), blank, an armor header ("Proc-Type: 4,...").
_KEY_LINE = re.compile(r"\s*(?:[A-Za-z0-9+/=]*|[A-Za-z][A-Za-z0-9-]*: .*)\s*")


def secret_variable_names(env: Mapping[str, Any] | None, variables: Mapping[str, str]) -> set[str]:
    """Variables whose values are secret: listed in ``secret.variables``, or named like a credential."""
    from seatide.config.job_text import flatten, names_listed

    # Read as the env option is (``"tenant, region_key"`` is two names): read whole, one string named no variable.
    names = set(names_listed(flatten(env or {}).get("secret.variables") or []) or [])
    return names | {name for name in variables if is_secret_key(name)}


def secret_values(text: str, variables: Mapping[str, str] | None = None) -> frozenset[str]:
    """Every secret value of a job: options named like credentials (after variables are
    filled in) and the values of its secret variables. A config that does not parse still
    has its credential-named variables found."""
    variables = dict(variables or {})
    return secrets_of(_job(text, variables), variables, text)


def secrets_of(job: "JobText | None", variables: Mapping[str, str] | None = None,
               text: str | None = None) -> frozenset[str]:
    """``secret_values`` of a job already parsed (``config.job_text``): the same parse the
    loader validated and the outline was drawn from. A variable's value is the one it resolved to: its
    default where none was given (``${tenant:ACME-9931}``, review 9 F2)."""
    from seatide.config.job_environment import Fed, split
    from seatide.config.job_text import environment_fed, variable_defaults
    from seatide.config.pasted_values import arrives_as

    if job is not None:
        variables, environment = dict(job.variables), dict(job.environment or ())
    else:
        variables, environment = split(dict(variables or {}))
    defaults = variable_defaults(job.text if job is not None else text or "", variables)
    found: set[str] = set()
    tree = job.tree if job is not None else None
    if tree is not None:
        _collect(tree, [], found)
        found |= _revealed(tree)
    env = tree.get("env") if tree else None
    names = secret_variable_names(env if isinstance(env, Mapping) else None, {**defaults, **variables})
    # As given, and as it arrives: a whole quoted string (``-i pw='"a b"'``) is its content (config.pasted_values).
    found |= {form for n in names if n in variables for form in (str(variables[n]), arrives_as(str(variables[n])))}
    found |= {value for n in names if n not in variables for value in defaults.get(n, ())}
    # The submitter's environment recorded with the job, and every value it fed into (``"nightly_"${T}``): secret
    # by where it came from, whatever the text's secret.variables says; ``Fed`` values are masked whole, however
    # short or ordinary (config/job_environment.py). Kept as ``Fed`` where another rule found the same value.
    fed = environment_fed(job) if job is not None else frozenset(Fed(v) for v in (environment or {}).values())
    return frozenset({v for v in found if v and v not in fed} | {v for v in fed if v})


def mask_message(message: str | None, values: Iterable[str]) -> str | None:
    """``message`` with its secrets masked where they stand as values.

    Always: a URL's password, a credential-named query parameter, a private key's PEM block and
    the value of every credential-named key (``password=...``, ``"token": "two words"``,
    ``PGPASSWORD=...``, ``credentials: {...}``), whatever the value, so a text whose run's
    secrets are not known (a forgotten job's event) shows none. Then each known secret value of at least
    ``MIN_SEARCHED`` characters: an ordinary word (letters and ``_`` only, ``postgres``)
    where it stands alone, never inside a name or a path (``postgres_cdc_table_1``,
    ``/var/lib/postgres``); any other value (``S3cret-9``, a tenant ``ACME-7731``) wherever it
    shows, since it cannot turn up inside a name by chance.

    Known values go first, longest first: a shape rule ends a value at a separator (``;``, ``,``, ``&``, ``)``,
    ``@``, a space), so run first it masked ``password -> x;Kq8v`` to ``******;Kq8v`` and left no whole value for
    the search to find (review 8, finding 2)."""
    if not message:
        return message
    return _mask_pairs(_mask_embedded(mask_values(message, values, ordinary_alone=True)))


def mask_refusal(message: str, values: Iterable[str]) -> str:
    """A config's refusal (the loader's message) masked as a message is, and where it quotes a credential-named key
    that ran on into its value or a credential option's value of the wrong type (``shapes.refusal_spans``)."""
    message = mask_message(message, values) or ""
    return _mask_spans(message, refusal_spans(message, is_secret_key))


def mask_tree(value: Any, values: Iterable[str]) -> Any:
    """A JSON value (an event's detail) masked as a job config is: the value under a credential-named
    key, whatever it is; every string, keys too (a table named after a secret tenant, a URL with its
    password: review 7, F4), as a message (``mask_message``). Masking its JSON text instead broke the
    text (a masked escaped quote) and missed pairs inside a string (``"why": "password=x"``)."""
    if isinstance(value, Mapping):
        masked: dict = {}
        for key, item in value.items():
            shown = mask_message(key, values) if isinstance(key, str) else key
            at = 2
            while shown in masked:      # two keys masked alike: both kept
                shown, at = f"{mask_message(key, values)} ({at})", at + 1
            masked[shown] = MASK if is_secret_key(str(key)) and item not in (None, "") else mask_tree(item, values)
        return masked
    if isinstance(value, list):
        return [mask_tree(item, values) for item in value]
    return mask_message(value, values) if isinstance(value, str) else value


def mask_config_text(text: str, variables: Mapping[str, str] | None = None) -> str:
    """The job file's text as written, comments and layout kept, with its secrets masked:
    the value of every credential-named option, URL passwords and credential-named query
    parameters, and distinctive secret values wherever they show. A value that merely equals
    an ordinary-word password (``user = postgres``) stays. A file that does not parse is
    masked as a message is."""
    variables = dict(variables or {})
    job = _job(text, variables)
    if job is None:
        return mask_message(text, secrets_of(None, variables))
    return mask_config(job)


def mask_config(job: "JobText") -> str:
    """``mask_config_text`` of a job already parsed."""
    text, secrets = job.text, secrets_of(job)
    spans = job.spans or {}
    masked = {span for path, found in spans.items() if _names_secret(path) for span in found}
    masked = sorted(masked | set(referred_spans(text, spans)), key=lambda span: span.start, reverse=True)
    for span in masked:           # from the end, so earlier offsets stay true
        text = text[:span.start] + span.quote + MASK + span.quote + text[span.end:]
    text = mask_comments(mask_defaults(text, secrets, MASK), lambda line: mask_message(line, secrets))
    return _mask_embedded(mask_values(text, secrets, ordinary_alone=False))     # whole values first


class LineMasker:
    """Masks a text that comes line by line (a driver's output: ``worker/driver_log.py``), each line as a message,
    and what one line does not show whole (review 7, F5): a private key block, every line from its BEGIN line to
    its END line; and each line of a multi-line secret value (a key in the config) wherever it shows. A line no
    key block holds (neither base64 nor an armor header) ends a block never closed, itself masked as a message:
    a key cut short leaves the rest of the log readable."""

    def __init__(self, values: Iterable[str]):
        values = frozenset(values)
        self.values = values | {line.strip() for value in values if "\n" in value for line in value.splitlines()
                                if len(line.strip()) >= MIN_SEARCHED}
        self._end: str | None = None        # inside a key block: the END line awaited

    def line(self, text: str) -> str:
        body = text.rstrip("\r\n")
        newline, shown = text[len(body):], ""
        if self._end is not None:
            close = body.find(self._end)
            if close < 0 and _KEY_LINE.fullmatch(body):
                return MASK + newline
            if close >= 0:
                shown, body = MASK, body[close + len(self._end):]
            self._end = None
        opened = list(_PEM_BEGIN.finditer(body))
        if opened and f"-----END {opened[-1]['kind']}-----" not in body[opened[-1].end():]:
            self._end = f"-----END {opened[-1]['kind']}-----"     # mask_message masks this line from BEGIN on
        if self.values or opened or shown:
            body = mask_message(body, self.values) if body else body
        return shown + body + newline


def mask_failure(exc: BaseException, values: Iterable[str]) -> str:
    """An exception's traceback as a log line shows it (``log.exception``'s text), masked: a connector's exception
    quotes what it connected with."""
    return mask_message("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)), values).rstrip()


class MaskingFilter(logging.Filter):
    """A log handler filter that masks a job's secrets in every line, tracebacks included. A worker's log
    serves many jobs: it ``hold``s the secrets of each attempt it runs and ``drop``s them when it ends."""

    def __init__(self, values: Iterable[str] = ()):
        super().__init__()
        self.values = self._own = frozenset(values)
        self._held: dict[Any, frozenset[str]] = {}
        self._holding = threading.Lock()        # a launch and a reap may come from two threads

    def hold(self, key: Any, values: Iterable[str]) -> None:
        with self._holding:
            self._held[key] = frozenset(values)
            self.values = self._own.union(*self._held.values())

    def drop(self, key: Any) -> None:
        with self._holding:
            self._held.pop(key, None)
            self.values = self._own.union(*self._held.values())

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = mask_message(record.getMessage(), self.values), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask_message(record.exc_text, self.values)
        return True


def _job(text: str, variables: dict[str, str]) -> "JobText | None":
    """The job's one parse (``config.job_text.read_job_text``, cached per process), or None
    when it does not parse."""
    from seatide.config.job_text import JobTextError, read_job_text

    try:
        return read_job_text(text, variables)
    except JobTextError:
        return None


def _names_secret(path: tuple[str, ...]) -> bool:
    """Whether the value at ``path`` (a ``JobText`` span's) is a credential option's."""
    from seatide.config.hocon import BLOCK_MARK

    keys = [k for k in path if not k.startswith("[") and not k.startswith(BLOCK_MARK)]
    return not _NOT_OPTIONS.intersection(keys) and bool(keys) and is_secret_key(option_name(keys))


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
        if is_secret_key(option_name(path)):
            found.add(str(node))
            found.update(_credential_parts(path[-1], str(node)))
        elif isinstance(node, str):     # a URL's password; a credential-named pair in a text (an Http body);
            found.update(m.group("value") for m in _embedded(node))      # an Oracle url's user/password@
            found.update(node[start:end] for start, end in password_spans(node, is_secret_key))
            # but no flag or column a query compares (``password_expired = false``): review 9, F4
            sql = bool(path) and bool({"query", "sql"} & set(words(path[-1])))
            found.update(v for v in (node[start:end] for start, end in _pair_spans(node)) if not is_plain(v, sql))


def _revealed(tree: Mapping) -> set[str]:
    """The values a shade hides (``shade.identifier``: base64, or aes256 where its key is at hand), in clear: the
    driver connects with them, and a connector's message shows them so (review 8, F3). Only their encoded form
    is in the config text. An option that does not decode is passed over, never every other one with it; a
    shade that cannot be read at all decodes nothing in any process (``shade.revealed_values``)."""
    from seatide.config.shade import revealed_values

    return revealed_values(tree) - _strings(tree)


def _strings(node: Any) -> set[str]:
    if isinstance(node, Mapping):
        return {text for value in node.values() for text in _strings(value)}
    if isinstance(node, list):
        return {text for item in node for text in _strings(item)}
    return {node} if isinstance(node, str) else set()


def _credential_parts(key: str, value: str) -> Iterable[str]:
    """What of a credential option's value may show alone: an Authorization header's credential after its
    scheme (``Bearer eyJ...``), a cookie header's values that could be a session's (``sid=Zq81-abcd``: not
    ``consent=true``, ``lang=english``, which would be masked in every text: review 9, F4)."""
    schemed = _SCHEMED.fullmatch(value.strip())
    if schemed and schemed["scheme"].lower() in _AUTH_SCHEMES:
        yield schemed["credential"]
    if words(key)[-1:] in (["cookie"], ["cookies"]):      # a session's, never a flag's or a language's
        parts = (pair.partition("=")[2].strip() for pair in value.split(";"))
        yield from (part for part in parts if not is_plain(part, words_too=True))


def _embedded(text: str) -> Iterable[re.Match]:
    """Credentials inside a value: a URL's password, a ``password=...`` query parameter."""
    yield from _URL_USERINFO.finditer(text)
    yield from (m for m in _URL_PARAM.finditer(text) if is_secret_param(m.group("key")))


def _mask_embedded(text: str) -> str:
    masked = lambda m: m.group("pre") + MASK + m.group("post")      # noqa: E731
    text = _URL_USERINFO.sub(masked, _PEM_PRIVATE.sub(MASK, text))
    text = _URL_PARAM.sub(lambda m: masked(m) if is_secret_param(m.group("key")) else m.group(0), text)
    return _mask_spans(text, password_spans(text, is_secret_key))


def _mask_pairs(text: str) -> str:
    """Each credential-named key's value in ``text`` (``_pair_spans``) masked."""
    return _mask_spans(text, _pair_spans(text))


def _mask_spans(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """``text`` with each span masked; one that starts inside an earlier one is in it already."""
    shown, at = [], 0
    for start, end in sorted(spans):
        if start >= at and start < end and text[start:end] != MASK:
            shown.append(text[at:start] + MASK)
            at = end
    return "".join(shown) + text[at:]


def _pair_spans(text: str) -> Iterable[tuple[int, int]]:
    """Where each credential-named key's value in ``text`` is. A key of another name does not take its value
    with it: a pair inside that value is looked at too (``why: password=x``). A lone ``key`` in prose
    ("duplicate key: 5") is not a credential's name (``is_secret_key``)."""
    if not _MAY_NAME_SECRET.search(text):
        return
    at = 0
    while (head := _PAIR_HEAD.search(text, at)) is not None:
        start = at = head.end()
        if is_secret_key(head.group("key")):
            at = _value_end(text, start, head.group("q"), head.group("key"))
            if start < at and text[start:at] != MASK:
                yield start, at


def _value_end(text: str, start: int, quote: str, key: str) -> int:
    """Where the value starting at ``start`` ends: a quoted one at its closing quote (spaces, commas,
    escaped quotes in it), a ``{...}`` or ``[...]`` at its closing bracket, a bare one at the next
    separator, with the credential after an auth scheme (``Authorization: Bearer x``), a cookie's to its
    line's end. One never closed ends with its line (a text cut short keeps no part of it)."""
    line_end = text.find("\n", start)
    line_end = len(text) if line_end < 0 else line_end
    if quote:
        at = start
        while (at := text.find(quote, at)) >= 0 and len(quote) == 1 and _escaped(text, at):
            at += 1
        return at if at >= 0 else line_end
    opening = text[start:start + 1]
    if opening in _CLOSING:
        depth = 0
        for at in range(start, len(text)):
            depth += (text[at] == opening) - (text[at] == _CLOSING[opening])
            if depth == 0:
                return at + 1
        return line_end
    if words(key)[-1] in ("cookie", "cookies"):
        cookie = _COOKIE_VALUE.match(text, start)
        return cookie.end() if cookie else start
    schemed = _SCHEMED.match(text, start)
    if schemed and schemed["scheme"].lower() in _AUTH_SCHEMES:
        return schemed.end()
    bare = _BARE_VALUE.match(text, start)
    return bare.end() if bare else start


def _escaped(text: str, at: int) -> bool:
    """Whether the character at ``at`` follows an odd number of backslashes."""
    slashes = 0
    while at - slashes > 0 and text[at - slashes - 1] == "\\":
        slashes += 1
    return slashes % 2 == 1
