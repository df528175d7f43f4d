"""Encrypt, decrypt and encode functions that SeaTunnel deployments add as Zeta UDFs.

They are not in SeaTunnel's function reference, but real jobs call them: ``X_ENC(data, key)``
returns the ciphertext as text, ``X_DEC(ciphertext, key)`` the UTF-8 plain text; NULL or ''
gives NULL. AES and DES run in ECB mode with PKCS5 padding, the key being the key string's
UTF-8 bytes; ``_ENC`` writes Base64, ``_DEC`` reads Base64 or hex (hex when the text is
only hex digits, a whole number of cipher blocks long).

Where Spark has the algorithm (AES, hex, Base64) the call becomes Spark SQL and runs in the
JVM. DES is not in Spark: it runs as a vectorised pandas UDF (pycryptodome, registered by
``sql.python_calls``).

SeaTunnel's UDFs fall back to a built-in key when none is given; SeaTide cannot know that key,
so the key argument is required (a validation error says so).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import TYPE_CHECKING

from sqlglot import exp

from seatide.sql.functions import Args, Function, SqlFunctionError, fill

if TYPE_CHECKING:
    import pandas as pd

# Spark's base64 may break lines every 76 characters (MIME, spark.sql.chunkBase64String.enabled);
# SeaTunnel's text is one line
_B64 = "translate(base64(%s), concat(chr(13), chr(10)), '')"
_BLANK = "CASE WHEN {0} IS NULL OR CAST({0} AS STRING) = '' THEN NULL ELSE %s END"
# Hex when only hex digits, whole cipher blocks of 16 bytes (32 digits); Base64 otherwise
_AES_BYTES = ("CASE WHEN {0} RLIKE '^[0-9A-Fa-f]+$' AND length({0}) % 32 = 0 "
              "THEN unhex({0}) ELSE unbase64({0}) END")
_AES_ENC = _BLANK % (_B64 % "aes_encrypt(encode(CAST({0} AS STRING), 'UTF-8'), "
                              "encode({1}, 'UTF-8'), 'ECB', 'PKCS')")
_AES_DEC = _BLANK % (f"decode(aes_decrypt({_AES_BYTES}, encode({{1}}, 'UTF-8'), 'ECB', 'PKCS'), "
                     "'UTF-8')")
DES_ENC_UDF, DES_DEC_UDF = "__seatide_des_enc", "__seatide_des_dec"
_AES_KEY_BYTES = (16, 24, 32)
_DES_KEY_BYTES = 8


def _needs_key(name: str, args: Args) -> None:
    if len(args) == 1:
        raise SqlFunctionError(
            f"{name} needs a key: SeaTunnel's UDF falls back to a built-in key that SeaTide does "
            f"not know; pass the key your data was encrypted with, e.g. {name}(field, 'my-key')")
    if len(args) != 2:
        raise SqlFunctionError(f"{name} takes 2 arguments (value, key), not {len(args)}")


def _literal_key(arg: exp.Expression) -> bytes | None:
    return arg.this.encode() if isinstance(arg, exp.Literal) and arg.is_string else None


def _aes(name: str, template: str):
    def rewrite(args: Args) -> exp.Expression:
        _needs_key(name, args)
        key = _literal_key(args[1])
        if key is not None and len(key) not in _AES_KEY_BYTES:
            raise SqlFunctionError(f"{name}: the key is {len(key)} bytes; AES takes a key of 16, "
                                   "24 or 32 bytes (AES-128, -192, -256)")
        return fill(template, args)
    return rewrite


def _des(name: str, udf: str):
    def rewrite(args: Args) -> exp.Expression:
        _needs_key(name, args)
        key = _literal_key(args[1])
        if key is not None and len(key) < _DES_KEY_BYTES:
            raise SqlFunctionError(f"{name}: the key is {len(key)} bytes; DES takes a key of at "
                                   "least 8 bytes (the first 8 are used)")
        return fill(_BLANK % f"{udf}(CAST({{0}} AS STRING), CAST({{1}} AS STRING))", args)
    return rewrite


def _keyless(template: str) -> dict[int, str]:
    # HEX and BASE64 are encodings: a key, if given, has nothing to do and is ignored
    return {1: _BLANK % template, 2: _BLANK % template}


_E = "beyond the reference (Zeta UDFs)"
CRYPTO_FUNCTIONS: dict[str, Function] = {
    "AES_ENC": Function(_E, _aes("AES_ENC", _AES_ENC), spark_has_it=False),
    "AES_DEC": Function(_E, _aes("AES_DEC", _AES_DEC), spark_has_it=False),
    "DES_ENC": Function(_E, _des("DES_ENC", DES_ENC_UDF), spark_has_it=False,
                        status="supported, run in Python (a pandas UDF): Spark has no DES"),
    "DES_DEC": Function(_E, _des("DES_DEC", DES_DEC_UDF), spark_has_it=False,
                        status="supported, run in Python (a pandas UDF): Spark has no DES"),
    "HEX_ENC": Function(_E, _keyless("lower(hex(encode(CAST({0} AS STRING), 'UTF-8')))"),
                        spark_has_it=False),
    "HEX_DEC": Function(_E, _keyless("decode(unhex({0}), 'UTF-8')"), spark_has_it=False),
    "BASE64_ENC": Function(_E, _keyless(_B64 % "encode(CAST({0} AS STRING), 'UTF-8')"),
                           spark_has_it=False),
    "BASE64_DEC": Function(_E, _keyless("decode(unbase64({0}), 'UTF-8')"), spark_has_it=False),
}
# SM4_ENC / SM4_DEC are left out: neither Spark nor pycryptodome has SM4 (a Python UDF can add it)


# --- DES in Python (Spark has no DES) --------------------------------------------------------

_HEX = re.compile(r"(?:[0-9A-Fa-f]{16})+\Z")


def _des_cipher(key: str, name: str):
    from Crypto.Cipher import DES

    raw = key.encode("utf-8")
    if len(raw) < _DES_KEY_BYTES:
        raise ValueError(f"{name}: the key is {len(raw)} bytes; DES takes a key of at least 8 bytes")
    return DES.new(raw[:_DES_KEY_BYTES], DES.MODE_ECB)     # as Java's DESKeySpec: the first 8


def _each(data: "pd.Series", key: "pd.Series", one, name: str) -> "pd.Series":
    ciphers: dict[str, object] = {}
    out = []
    for value, k in zip(data, key):
        if value is None or value == "" or k is None:
            out.append(None)
            continue
        cipher = ciphers.get(k) or ciphers.setdefault(k, _des_cipher(k, name))
        out.append(one(cipher, value))
    import pandas as pd

    return pd.Series(out, dtype=object)


def _encrypt(cipher, value: str) -> str:
    from Crypto.Util.Padding import pad

    return base64.b64encode(cipher.encrypt(pad(value.encode("utf-8"), 8))).decode("ascii")


def _decrypt(cipher, value: str) -> str:
    from Crypto.Util.Padding import unpad

    try:
        raw = bytes.fromhex(value) if _HEX.match(value) else base64.b64decode(value, validate=True)
        return unpad(cipher.decrypt(raw), 8).decode("utf-8")
    except (ValueError, binascii.Error):
        raise ValueError(f"DES_DEC: '{value[:40]}' is not DES ciphertext (Base64 or hex) "
                         "made with this key") from None


def des_enc(data: "pd.Series", key: "pd.Series") -> "pd.Series":
    return _each(data, key, _encrypt, "DES_ENC")


def des_dec(data: "pd.Series", key: "pd.Series") -> "pd.Series":
    return _each(data, key, _decrypt, "DES_DEC")


__all__ = ["CRYPTO_FUNCTIONS", "DES_DEC_UDF", "DES_ENC_UDF", "des_dec", "des_enc"]
