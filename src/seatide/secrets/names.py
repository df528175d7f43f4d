"""Which option and variable names hold a credential (``is_secret_key``): the rule docs/security.md states."""

from __future__ import annotations

import re
from functools import lru_cache

# A name holding one of these words holds a credential ...
_SECRET_WORDS = frozenset({"password", "passwd", "pwd", "passphrase", "secret", "token", "credential",
                           "credentials", "jaas", "authorization", "cookie", "cookies"})   # HTTP's headers too
_SECRET_ENDINGS = ("password", "passwd", "passphrase", "secret", "token", "credential", "credentials")
# ... unless its last word says it is *about* a secret: where it is, what kind, its name.
_DESCRIPTIVE = frozenset({"provider", "class", "type", "mode", "path", "file", "location", "name", "names",
                          "id", "url", "uri", "enabled", "variables", "column", "columns", "field", "fields",
                          "length", "size", "format", "timeout", "expire", "ttl"})
# ``key`` is a credential only after one of these words; ``partition_key``, ``sort_key``,
# ``primary_keys``, ``key_column``, ``rowkey_column`` name columns, and a bare ``key`` is Redis'
# name of the key it writes (SeaTunnel's only option called just ``key``): none is a secret.
_KEY_QUALIFIERS = frozenset({"access", "secret", "private", "api", "auth", "client", "encryption", "encrypt",
                             "decrypt", "signing", "sign", "master", "account", "app", "shared", "session",
                             "ssh", "aes", "des", "hmac", "license"})
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def words(name: str) -> list[str]:
    """``name``'s words, lower case: split at ``.``, ``_``, ``-`` and camelCase (``accessKeySecret``)."""
    return [w.lower() for w in _WORD.findall(name)]


@lru_cache(maxsize=4096)      # every key of every pair in a message is asked: the same few names, over and over
def is_secret_key(name: str) -> bool:
    """Whether an option (or variable) named ``name`` holds a credential.

    ``name`` may be dotted (``fs.s3a.secret.key``) or camelCase (``accessKeySecret``)."""
    parts = words(name)
    if not parts or parts[-1] in _DESCRIPTIVE:
        return False
    if any(w in _SECRET_WORDS for w in parts):
        return True
    if any(w.endswith(_SECRET_ENDINGS) for w in parts):     # written as one word: PGPASSWORD, accesstoken
        return True
    if "".join(parts).endswith(_SECRET_ENDINGS):            # one word cut in two by its case: passWord
        return True
    if parts[-1] == "key":
        return len(parts) > 1 and parts[-2] in _KEY_QUALIFIERS
    if parts[-1].endswith("key") and parts[-1][:-3] in _KEY_QUALIFIERS:     # as one word: apikey, X-APIKEY
        return True
    return parts[-1] == "auth"      # Redis' ``auth`` is its password


__all__ = ["is_secret_key", "words"]
