"""A job's known secret values, searched for in a text (``secrets.mask_message``, ``mask_config``).

A value is masked where it shows, with two exceptions that keep ordinary text readable. An ordinary word
(``postgres``: also a user's, a database's, a table's name) only where it stands alone. A value whose edge is a
digit (``123456``, SeaTunnel's docs' commonest password) only where that edge does not run on into more digits or
letters: ``id > 1234567`` and ``/data/2024/123456789`` hold other numbers, not the password (review 9, F3), while
``password=123456``, ``root:123456@`` and ``"123456"`` still show it whole.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable

from seatide.secrets.shapes import carried_forms

MASK = "******"
# Shorter values are masked where they are an option's value, but not searched for inside
# free text: masking every "abc" in a message would make the message unreadable.
MIN_SEARCHED = 4
# A value from the submitter's environment is known secret: searched for from this length (``mask_values``).
MIN_FED_SEARCHED = 3

# An ordinary word: the kind of value that is also the name of a user, a database, a table.
_ORDINARY = re.compile(r"[A-Za-z_]+")
# Standing alone: not touching a name's characters, nor a . / \ - that joins it to more of a
# name or a path (postgres.public, /var/lib/postgres/data, postgres-cdc), on either side.
_ALONE_BEFORE = r"(?<![\w$./\\])(?<!\w-)"
_ALONE_AFTER = r"(?![\w$])(?![./\\-]\w)"
# A digit at a value's edge is a whole token's edge only where no digit or letter continues it.
_DIGIT_EDGE_BEFORE = r"(?<![A-Za-z0-9])"
_DIGIT_EDGE_AFTER = r"(?![A-Za-z0-9])"
# What a credential-named pair inside a longer text may hold that no one would take for a secret: SQL's
# ``password_expired = false``, ``token_revoked = 'false'``, a cookie's ``consent=true``.
_PLAIN_WORDS = frozenset({"true", "false", "null", "none", "nil", "yes", "no", "on", "off", "undefined"})


def is_plain(value: str, words_too: bool) -> bool:
    """Whether ``value``, found as a credential-named pair's value inside a longer text, is no credential: a
    boolean or null; with ``words_too`` (SQL text, a cookie's parts) also an ordinary word or a number, which
    there name a column, a flag, a language."""
    value = value.strip()
    if value.lower() in _PLAIN_WORDS:
        return True
    return words_too and bool(_ORDINARY.fullmatch(value) or value.isdigit())


def mask_values(text: str, values: Iterable[str], ordinary_alone: bool) -> str:
    """Each secret value of at least ``MIN_SEARCHED`` characters: a distinctive one wherever it shows (a digit
    at its edge bounded, above); an ordinary word only where it stands alone (``ordinary_alone``), else not.

    A value that came from the submitter's environment (``config.job_environment.Fed``: a recorded value or
    one it fed into) is secret by origin, not by its look: a text that is exactly it (a job's name, an option's
    value in envOptions, a plan's output) is masked whole, however short; inside a longer text it is masked
    wherever it shows once it has ``MIN_FED_SEARCHED`` characters, a word or not (over-masking a message beats
    showing ``acme``); a 1-2 character one is not searched for in free text, which would mask every ``a``."""
    values = values if isinstance(values, frozenset) else frozenset(values)
    fed = frozenset(str(value) for value in values if type(value) is not str)
    if fed and text in fed:
        return MASK
    for form, pattern in _searched(values, fed):
        if pattern is None:
            text = text.replace(form, MASK)
        elif ordinary_alone or not _ORDINARY.fullmatch(form):
            text = pattern.sub(MASK, text)
    return text


@lru_cache(maxsize=256)     # a job's secrets mask every line of its driver's log
def _searched(values: frozenset[str], fed: frozenset[str]) -> tuple[tuple[str, re.Pattern | None], ...]:
    """Every form of each value that is searched for (``shapes.carried_forms``: URL-encoded, in a bytes repr,
    JSON-escaped, ...), longest first, so a shorter one never cuts a longer one in two; each with the pattern
    that bounds it (None: found wherever it shows). ``fed`` (plain ``str``s, so the cache never takes a set of
    them for the equal set of ordinary values) are found wherever they show."""
    forms = {form: _bounded(form) for value in values - fed for form in carried_forms(value)
             if len(form) >= MIN_SEARCHED}
    forms.update({form: None for value in fed for form in carried_forms(value) if len(form) >= MIN_FED_SEARCHED})
    return tuple((form, forms[form]) for form in sorted(forms, key=len, reverse=True))


def _bounded(form: str) -> re.Pattern | None:
    if _ORDINARY.fullmatch(form):
        return re.compile(_ALONE_BEFORE + re.escape(form) + _ALONE_AFTER)
    if not (form[0].isdigit() or form[-1].isdigit()):
        return None
    return re.compile((_DIGIT_EDGE_BEFORE if form[0].isdigit() else "") + re.escape(form)
                      + (_DIGIT_EDGE_AFTER if form[-1].isdigit() else ""))


__all__ = ["MASK", "MIN_FED_SEARCHED", "MIN_SEARCHED", "is_plain", "mask_values"]
