"""Where a secret hides in a text from a search for its own letters, or for ``key=value``.

Two kinds. A password a command line or a connect string holds with no credential-named key beside it
(``password_spans``): masked whatever its value, as a URL's password is, so a text whose job's secrets are not
known shows none either. And the forms a known secret is carried in (``carried_forms``): a message that
URL-encodes it, shows it inside a bytes repr or JSON-escapes it holds none of its letters in a row.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Callable, Iterator
from urllib.parse import quote, quote_plus, unquote

# A value as a shell or a message quotes it, or bare to the next space.
_VALUE = r"""(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s'"]+)"""
# A long option, its value after a space (``--password P``, ``--api-token 'a b'``); ``--password=P`` is a pair.
# A next word that is itself an option is not its value (psql's ``--password`` takes none: it asks).
_LONG_OPTION = re.compile(r"(?<![\w-])--(?P<key>[A-Za-z][\w.-]*)[ \t]+(?!-)" + _VALUE)
# MySQL's and MariaDB's clients take the password glued to ``-p`` (``-pP``; ``-p`` alone asks for it): only
# on a line that runs one, as ``-p`` is a port to psql and means something else to every other tool.
_MYSQL_COMMAND = re.compile(r"(?<![\w.-])(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlshow|mysqlbinlog"
                            r"|mysqlpump|mysqlsh|mariadb(?:-dump|-admin|-import|-check|-show|-binlog)?)(?:\.exe)?"
                            r"[ \t][^\n]*")
_GLUED_P = re.compile(r"(?<=[ \t])-p" + _VALUE)
# Oracle's ``user/password@connect_identifier`` (sqlplus, ``jdbc:oracle:thin:user/password@host:1521/ORCL``). The
# user stands alone: not after a path's ``/`` or ``.``, nor a package's ``@scope`` (``org/repo@main`` stays).
_ORACLE = re.compile(r"""(?<![\w$#./\\@-])[A-Za-z][\w$#]*/(?P<value>"[^"\n]+"|[^\s/@'"]+)@(?=[\w/\[(])""")


def password_spans(text: str, is_secret_key: Callable[[str], bool]) -> Iterator[tuple[int, int]]:
    """Where ``text`` holds a password by its place alone: after a credential-named long option
    (``--password P``), glued to a MySQL client's ``-p``, between an Oracle user's ``/`` and its ``@``.
    A quoted value's span is inside its quotes."""
    for option in _LONG_OPTION.finditer(text):
        if is_secret_key(option["key"]):
            yield _inside_quotes(option)
    for command in _MYSQL_COMMAND.finditer(text):
        yield from (_inside_quotes(m) for m in _GLUED_P.finditer(text, command.start(), command.end()))
    yield from (_inside_quotes(m) for m in _ORACLE.finditer(text))


# A refusal quotes what it could not read: a key path that ran on into its value (``the key 'password Hunter2'``,
# an ``=`` forgotten) and the value of an option of the wrong type (``option 'password' must be string, got {...}``).
_QUOTED_KEY = re.compile(r"'(?P<key>[A-Za-z][\w.\-]*)[ \t]+(?P<value>[^'\n]+)'")
_WRONG_TYPE = re.compile(r"option '(?P<key>[^'\n]+)' must be [^,\n]+, got (?P<value>[^\n]+)")


def refusal_spans(text: str, is_secret_key: Callable[[str], bool]) -> Iterator[tuple[int, int]]:
    """Where a refusal (a config the loader could not read) quotes a credential-named key's value (review 9, F7)."""
    for pattern in (_QUOTED_KEY, _WRONG_TYPE):
        yield from (m.span("value") for m in pattern.finditer(text) if is_secret_key(m["key"].split(".")[-1]))


def _inside_quotes(match: re.Match) -> tuple[int, int]:
    start, end = match.span("value")
    return (start + 1, end - 1) if match["value"][:1] in "'\"" else (start, end)


@lru_cache(maxsize=4096)     # asked of every secret for every message and driver log line: the same few values
def carried_forms(value: str) -> tuple[str, ...]:
    """``value`` as written, then each other form a message may carry it in: URL-encoded (``p%40ss``, a space
    as ``+`` too) or, written encoded in the config, decoded; inside a bytes or a str repr (``b'p\\xc3\\xa4ss'``,
    escaped quotes and backslashes); JSON-escaped, ASCII or not, once or twice (a JSON text inside a JSON
    string)."""
    escaped = {json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    forms = [value, quote(value, safe=""), quote(value), quote_plus(value), unquote(value),
             repr(value.encode())[2:-1], repr(value)[1:-1], *escaped, *(json.dumps(once)[1:-1] for once in escaped)]
    return tuple(dict.fromkeys(forms))


__all__ = ["carried_forms", "password_spans", "refusal_spans"]
