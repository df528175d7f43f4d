"""SeaTunnel's config encryption: ``env { shade.identifier = ... }``.

A job that names a shade gives some options of its source and sink blocks encrypted, so
that passwords need not be written in clear: ``username``, ``password``, ``auth``,
``token``, ``access_key``, ``secret_key`` (SeaTunnel's list), and every key named in
``env { shade.options = [...] }`` (a dotted key reaches into a nested object). A list
value has each element encrypted. The loader decrypts them before validation; the job
text in the store keeps them encrypted.

Shades:

- ``default`` (or none): values are read as written, as in SeaTunnel.
- ``base64``: SeaTunnel's. An encoding, not a secret: it keeps a password out of sight
  of a casual reader, nothing more.
- ``aes256``: SeaTide's. AES-256-GCM with the key read from the file named by
  ``env { shade.key-file = ... }`` or the environment variable ``SEATIDE_SHADE_KEY_FILE``
  (32 bytes: raw, 64 hex digits or Base64). A value is Base64 of nonce (12 bytes),
  ciphertext and tag (16 bytes).

An AES value is decrypted only where the job runs (``runs_here``): the driver, a local
``seatide run``. A coordinator that merely validates a submission checks that each
value is well formed and leaves it encrypted; it needs no key.

``encrypt_config`` / ``decrypt_config`` work on a whole job tree (what ``/encrypt-config``
and a ``--encrypt`` command line take); the loader uses ``read_shade`` and ``Shade.reveal``
per plugin block so that messages can name the plugin.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Any, Mapping

from seatide.config.hocon.values import MAX_NESTING, nested_past
from seatide.config.job_text import dotted, flatten

SENSITIVE_OPTIONS = ("username", "password", "auth", "token", "access_key", "secret_key")
SHADES = ("default", "base64", "aes256")
KEY_FILE_ENV = "SEATIDE_SHADE_KEY_FILE"
SHADED_SECTIONS = ("source", "sink")      # SeaTunnel leaves transforms as written

_NONCE, _TAG, _KEY = 12, 16, 32


class ShadeError(ValueError):
    """A shaded config cannot be read; ``str()`` says what, where and how to fix it."""

    def __init__(self, message: str, option: str | None = None):
        super().__init__(message)
        self.option = option


@dataclass(frozen=True)
class Shade:
    identifier: str
    options: tuple[str, ...]        # the option keys it covers
    key: bytes | None = None        # aes256, where the job runs

    @property
    def active(self) -> bool:
        return self.identifier != "default"

    def reveal(self, block: Mapping[str, Any], where: str) -> dict:
        """The block with its shaded options decrypted (or, without the key, only checked)."""
        return self._apply(block, where, self.decrypt)

    def hide(self, block: Mapping[str, Any], where: str) -> dict:
        """The block with its shaded options encrypted."""
        if self.identifier == "aes256" and self.key is None:
            raise ShadeError(_no_key_message("encrypt"), option="shade.key-file")
        return self._apply(block, where, self._encrypt)

    def _apply(self, block: Mapping[str, Any], where: str, step) -> dict:
        out = copy.deepcopy(dict(block))
        if not self.active:
            return out
        for option in self.options:
            found = _locate(out, option)
            if found is None:
                continue
            parent, key = found
            value = parent[key]
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                parent[key] = [step(v, where, option) for v in value]
            elif isinstance(value, str):
                parent[key] = step(value, where, option)
            else:
                raise ShadeError(f"{where}: option '{option}' is covered by shade.identifier = "
                                 f"\"{self.identifier}\" but is not a string; write it as a quoted string",
                                 option=option)
        return out

    def _encrypt(self, value: str, where: str, option: str) -> str:
        data = value.encode("utf-8")
        if self.identifier == "base64":
            return base64.b64encode(data).decode("ascii")
        nonce = _synthetic_nonce(self.key, data)
        from Crypto.Cipher import AES
        ciphertext, tag = AES.new(self.key, AES.MODE_GCM, nonce=nonce).encrypt_and_digest(data)
        return base64.b64encode(nonce + ciphertext + tag).decode("ascii")

    def decrypt(self, value: str, where: str, option: str) -> str:
        how = {"base64": "Base64 text",
               "aes256": "an aes256 value (Base64 of nonce, ciphertext and tag)"}[self.identifier]
        failed = ShadeError(f"{where}: option '{option}' does not decrypt with shade.identifier = "
                            f"\"{self.identifier}\"; it must be {how}. Encrypt it with POST /encrypt-config "
                            "(or write it in clear and drop shade.identifier)", option=option)
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise failed from None
        if self.identifier == "base64":
            return _utf8(raw, failed)
        if len(raw) < _NONCE + _TAG:
            raise failed
        if self.key is None:
            return value    # checked, not decrypted: this process does not run the job
        from Crypto.Cipher import AES
        try:
            plain = AES.new(self.key, AES.MODE_GCM, nonce=raw[:_NONCE]).decrypt_and_verify(
                raw[_NONCE:-_TAG], raw[-_TAG:])
        except ValueError:
            raise ShadeError(f"{where}: option '{option}' does not decrypt with the aes256 key "
                             f"{self.key_hint}: it was encrypted with another key, or altered",
                             option=option) from None
        return _utf8(plain, failed)

    @property
    def key_hint(self) -> str:
        # A short digest names the key in messages without revealing it.
        return f"(sha256 {hashlib.sha256(self.key).hexdigest()[:8]})" if self.key else ""


def read_shade(env: Mapping[str, Any], *, runs_here: bool = True) -> Shade:
    """The shade an env block names. ``runs_here``: this process runs the job, so an
    aes256 shade needs its key; elsewhere values are checked and left encrypted."""
    flat = flatten(env)
    identifier = flat.get("shade.identifier") or "default"
    if not isinstance(identifier, str) or identifier.lower() not in SHADES:
        raise ShadeError(f"shade.identifier {identifier!r} is not known: use one of {', '.join(SHADES)} "
                         "(SeaTunnel's custom ConfigShade classes cannot run in SeaTide)",
                         option="shade.identifier")
    identifier = identifier.lower()
    extra = flat.get("shade.options") or []
    if not isinstance(extra, list) or not all(isinstance(o, str) and o for o in extra):
        raise ShadeError("shade.options must be a list of option names, e.g. [\"host\", \"props.secret\"]",
                         option="shade.options")
    options = tuple(dict.fromkeys([*SENSITIVE_OPTIONS, *extra]))
    key = None
    if identifier == "aes256":
        path = flat.get("shade.key-file") or os.environ.get(KEY_FILE_ENV)
        if path:
            key = _read_key(str(path))
        elif runs_here:
            raise ShadeError(_no_key_message("decrypt"), option="shade.key-file")
    return Shade(identifier, options, key)


def encrypt_config(tree: Mapping[str, Any]) -> dict:
    """The job tree with the options its shade covers encrypted (env kept as written)."""
    _refuse_deep(tree)
    shade = read_shade(_env_of(tree))
    return _each_block(tree, lambda block, where: shade.hide(block, where))


def decrypt_config(tree: Mapping[str, Any], runs_here: bool = True) -> dict:
    """The job tree with the options its shade covers in clear (aes256's only where its key is at hand, when
    not ``runs_here``: ``read_shade``)."""
    _refuse_deep(tree)
    shade = read_shade(_env_of(tree), runs_here=runs_here)
    return _each_block(tree, lambda block, where: shade.reveal(block, where))


def revealed_values(tree: Mapping[str, Any]) -> set[str]:
    """The clear text of every shaded option that decodes (aes256's where its key is at hand), for
    masking: an option that does not decode has no clear text anywhere, so it is passed over, not
    every other one with it. A tree nested past the reader's limit raises ``ShadeError``."""
    env = tree.get("env") if isinstance(tree, Mapping) else None
    if not isinstance(env, Mapping):        # no env object, no shade: nothing is hidden
        return set()
    _refuse_deep(tree)
    try:
        shade = read_shade(env, runs_here=False)
    except ShadeError:
        # Not "nothing to mask" for a failure to decode: a shade that cannot be read (an unknown
        # identifier, an unreadable key file) decodes nothing in any process, and the job's loader
        # refuses it; masking that refusal's message must not fail with it.
        return set()
    found: set[str] = set()

    def each(block: dict, where: str) -> dict:
        for option in shade.options if shade.active else ():
            spot = _locate(block, option)
            value = spot[0][spot[1]] if spot else None
            for text in value if isinstance(value, list) else [value]:
                try:
                    if isinstance(text, str):
                        found.add(shade.decrypt(text, where, option))
                except ShadeError:
                    pass
        return block

    _each_block(tree, each)
    return found


def _refuse_deep(tree: Any) -> None:
    """A tree from a request body (``/encrypt-config``) is checked as a job text is: nesting past
    ``MAX_NESTING`` is refused before anything recurses through it (copy, flatten, JSON)."""
    path = nested_past(tree)
    if path is not None:
        under = dotted(tuple(f"[{key}]" if isinstance(key, int) else str(key) for key in path[:4]))
        raise ShadeError(f"objects and lists nest more than {MAX_NESTING} levels deep in the config (under "
                         f"{under}...); a job needs a few levels: write the value flatter")


def _env_of(tree: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(tree, Mapping):
        raise ShadeError("a job config is an object with env, source, transform and sink")
    env = tree.get("env") or {}
    if not isinstance(env, Mapping):
        raise ShadeError(f"env must be an object (like {{\"shade.identifier\": \"base64\"}}), "
                         f"not {type(env).__name__}")
    return env


def _each_block(tree: Mapping[str, Any], change) -> dict:
    """Apply ``change`` to every source and sink block, in either job file style."""
    if not isinstance(tree, Mapping):
        raise ShadeError("a job config is an object with env, source, transform and sink")
    out = copy.deepcopy(dict(tree))
    for kind in SHADED_SECTIONS:
        section = out.get(kind)
        if isinstance(section, list):           # JSON style: [{"plugin_name": "Jdbc", ...}]
            out[kind] = [change(b, f"{kind}[{i}] {b.get('plugin_name', '?')}") if isinstance(b, Mapping) else b
                         for i, b in enumerate(section)]
        elif isinstance(section, Mapping):      # HOCON style: {Jdbc: {...}}
            out[kind] = {name: change(b, f"{kind}[{i}] {name}") if isinstance(b, Mapping) else b
                         for i, (name, b) in enumerate(section.items())}
    return out


def _locate(block: dict, option: str) -> tuple[dict, str] | None:
    """Where ``option`` lives in a block: a key as written (``access_key``, ``"a.b"``) or a
    dotted path through nested objects (HOCON's ``a.b = 1``)."""
    if option in block:
        return block, option
    head, _, rest = option.partition(".")
    if rest and isinstance(block.get(head), dict):
        return _locate(block[head], rest)
    return None


def _synthetic_nonce(key: bytes, data: bytes) -> bytes:
    # The nonce is a keyed digest of the value (the SIV construction), so encrypting the
    # same value twice gives the same text: a job file re-encrypted for a resume keeps its
    # pipeline fingerprint, and a nonce repeats only with its plain text.
    nonce_key = hashlib.sha256(b"seatide shade nonce\0" + key).digest()
    return hmac.new(nonce_key, data, hashlib.sha256).digest()[:_NONCE]


def _read_key(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise ShadeError(f"the aes256 key file {path} cannot be read ({exc.strerror or exc}); set "
                         f"env shade.key-file or {KEY_FILE_ENV} to a readable file",
                         option="shade.key-file") from None
    text = raw.strip()
    for decode in (binascii.unhexlify, lambda t: base64.b64decode(t, validate=True)):
        try:
            key = decode(text)
        except (binascii.Error, ValueError):
            continue
        if len(key) == _KEY:
            return key
    if len(raw) == _KEY:
        return raw
    raise ShadeError(f"the aes256 key file {path} does not hold a 32-byte key (raw, 64 hex digits or "
                     "Base64); make one with: head -c 32 /dev/urandom | base64 > KEYFILE",
                     option="shade.key-file")


def _no_key_message(verb: str) -> str:
    return (f"shade.identifier = \"aes256\" needs its key to {verb}: set env shade.key-file or "
            f"{KEY_FILE_ENV} to a file holding the 32-byte key")


def _utf8(raw: bytes, failed: ShadeError) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise failed from None
