"""Which option and variable names hold a credential (``is_secret_key``): the rule docs/security.md states."""

from __future__ import annotations

import re
from functools import lru_cache

# A name holding one of these words holds a credential ...
_SECRET_WORDS = frozenset({"password", "passwords", "passwd", "pwd", "passphrase", "secret", "token", "credential",
                           "credentials", "jaas", "authorization", "cookie", "cookies"})   # HTTP's headers too
_SECRET_ENDINGS = ("password", "passwd", "passphrase", "secret", "token", "credential", "credentials")
# ... unless its last word says it is *about* a secret: where it is, what kind, its name.
_DESCRIPTIVE = frozenset({"provider", "class", "type", "mode", "path", "file", "location", "name", "names",
                          "id", "url", "uri", "enabled", "variables", "column", "columns", "field", "fields",
                          "length", "size", "format", "timeout", "expire", "ttl"})
# ``key`` as a name's last word is a credential (``api_key``, ``Ocp-Apim-Subscription-Key``, ``DD-APPLICATION-KEY``,
# ``x-functions-key``: the Http connector's headers), unless the word before it makes it a data key: a column, a
# partition, a row, a cache entry (``partition_key``, ``sort_key``, ``hash_key``, ``UNIQUE_KEY``); a bare ``key`` is
# Redis' name of the key it writes (SeaTunnel's only option called just ``key``), and the plugin's or section's
# name before it (``sink.Redis.key``) is no qualifier either. ``keys`` and ``key_column`` never hold a credential.
_DATA_KEYS = frozenset({"primary", "partition", "partitions", "sort", "sorting", "row", "rowkey", "foreign", "unique",
                        "index", "hash", "range", "distribution", "distributed", "shard", "sharding", "routing",
                        "message", "record", "records", "join", "merge", "group", "lookup", "cache", "table",
                        "column", "columns", "field", "chunk", "split", "bucket", "cluster", "clustering", "dedup",
                        "dedupe", "natural", "surrogate", "composite", "business", "order", "constraint", "identity",
                        "idempotency", "dimension", "schema", "object", "document", "doc", "event", "map", "upsert",
                        "conflict", "redis", "source", "sink", "transform", "named", "hashed", "block", "landed",
                        "located", "the", "a", "for", "by", "of"})
# ``key`` written glued to the word before it: ``apikey``, ``accesskey`` (``rowkey``, ``primarykey`` are data keys).
_ONE_WORD_KEYS = frozenset({"access", "secret", "private", "api", "auth", "client", "encryption", "signing", "master",
                            "account", "app", "shared", "session", "ssh", "subscription", "license"})
# A name ending in one of these holds a credential: a request's signature (``X-Amz-Signature``, ``sig``), a session
# (``X-Session``); what the Http connector never shows (connectors/http/client.py).
# Short forms too, as a last word after another (``db_pw``, ``smtp_pass``, ``mail.pwd``; ``pass`` alone may be a step):
# review 9, F9. Azure's shared access signature (``fs.azure.sas.<container>.<account>.blob.core.windows.net``).
_SECRET_LAST = frozenset({"signature", "sig", "session", "pass", "pw", "pwd", "sas"})
# A bare ``key`` is a credential where an HTTP API puts it, as a query parameter or a header (``?key=AIza...``);
# as an option it is Redis' (above), in prose a data key ("duplicate key: 5").
_PARAM_ONLY = frozenset({"key", "sig", "signature", "session"})
# A Hadoop setting named for the host it holds a credential of: the credential's word comes before the host
# (``fs.azure.account.key.<account>.dfs.core.windows.net``; review 9, F5). The name is judged up to that word.
_HOST_END = re.compile(r"\.(?:net|com|cn|de|io|org)$", re.IGNORECASE)
_BEFORE_HOST = frozenset({"key", "sas", "secret", "token", "password"})
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def words(name: str) -> list[str]:
    """``name``'s words, lower case: split at ``.``, ``_``, ``-`` and camelCase (``accessKeySecret``)."""
    return [w.lower() for w in _WORD.findall(name)]


@lru_cache(maxsize=4096)      # every key of every pair in a message is asked: the same few names, over and over
def is_secret_key(name: str) -> bool:
    """Whether an option (or variable) named ``name`` holds a credential.

    ``name`` may be dotted (``fs.s3a.secret.key``) or camelCase (``accessKeySecret``)."""
    if _HOST_END.search(name):
        labels = name.split(".")
        named = [at for at, label in enumerate(labels[1:], 1) if label.lower() in _BEFORE_HOST]
        if named:
            return is_secret_key(".".join(labels[:named[-1] + 1]))
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
        return len(parts) > 1 and parts[-2] not in _DATA_KEYS
    if parts[-1].endswith("key") and parts[-1][:-3] in _ONE_WORD_KEYS:     # as one word: apikey, X-APIKEY
        return True
    if parts[-1] in _SECRET_LAST:
        return len(parts) > 1 and parts[-2] != "spark"      # SparkSession: Spark's, in every driver line
    return parts[-1] == "auth"      # Redis' ``auth`` is its password


def option_name(keys: list[str]) -> str:
    """The name an option's path is judged by: its last few keys together, as HOCON nests ``fs.s3a.secret.key``
    as four objects; more where they end in a host name, which is itself several keys unquoted."""
    return ".".join(keys[-12:] if _HOST_END.search(".".join(keys[-4:])) else keys[-4:])


def is_secret_param(name: str) -> bool:
    """Whether a URL's query parameter or an HTTP header named ``name`` holds a credential: ``is_secret_key``, or a
    bare ``key``, ``sig``, ``signature`` or ``session`` (the Http connector and the masker use this one rule)."""
    parts = words(name)
    return is_secret_key(name) or (len(parts) == 1 and parts[0] in _PARAM_ONLY)


__all__ = ["is_secret_key", "is_secret_param", "option_name", "words"]
