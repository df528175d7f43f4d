"""The UDFs SeaTunnel's SQL engine ships with, beyond its function page.

SeaTunnel registers these as built-in Zeta UDFs, and its jobs call them:

* ``DES_ENCRYPT(password, data)``: DES in CBC mode with PKCS5 padding and the fixed IV
  ``12345678``, the key being the first 8 bytes of the password (UTF-8); the ciphertext as
  Base64 text. ``DES_DECRYPT(password, text)`` reverses it; text it cannot decrypt is given back
  as it is, as SeaTunnel's does. The password comes first, and must be at least 8 characters
  (a job with a shorter one fails). NULL in either argument gives NULL.
* ``CHINESE_TO_NUM(text)``: a number written in Chinese numerals (一千二百三十四, 壹万贰仟,
  with 十 百 千 万 亿 兆 京) as a BIGINT; blank text gives NULL, other characters fail the job.

Spark has neither, so they run as vectorised pandas UDFs (``sql.python_calls``).
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

from sqlglot import exp

from seatide.sql.functions import Args, Function, SqlFunctionError, fill

if TYPE_CHECKING:
    import pandas as pd

DES_ENCRYPT_UDF, DES_DECRYPT_UDF = "__seatide_des_encrypt", "__seatide_des_decrypt"
CHINESE_TO_NUM_UDF = "__seatide_chinese_to_num"
_IV = b"12345678"
_MIN_PASSWORD = 8


def _des(name: str, udf: str):
    def rewrite(args: Args) -> exp.Expression:
        if len(args) != 2:
            raise SqlFunctionError(f"{name} takes 2 arguments (password, data), not {len(args)}")
        password = args[0]
        if isinstance(password, exp.Literal) and password.is_string and len(password.this) < _MIN_PASSWORD:
            raise SqlFunctionError(f"{name}: the password (its first argument) is {len(password.this)} "
                                   f"characters; it must be at least {_MIN_PASSWORD}")
        return fill(f"{udf}(CAST({{0}} AS STRING), CAST({{1}} AS STRING))", args)
    return rewrite


def _chinese_to_num(args: Args) -> exp.Expression:
    if len(args) != 1:
        raise SqlFunctionError(f"CHINESE_TO_NUM takes 1 argument, not {len(args)}")
    return fill(f"{CHINESE_TO_NUM_UDF}(CAST({{0}} AS STRING))", args)


_Z = "beyond the reference (SeaTunnel's built-in Zeta UDFs)"
_PY = "supported, run in Python (a pandas UDF): Spark has no such function"
ZETA_UDFS: dict[str, Function] = {
    "DES_ENCRYPT": Function(_Z, _des("DES_ENCRYPT", DES_ENCRYPT_UDF), spark_has_it=False, status=_PY),
    "DES_DECRYPT": Function(_Z, _des("DES_DECRYPT", DES_DECRYPT_UDF), spark_has_it=False, status=_PY),
    "CHINESE_TO_NUM": Function(_Z, _chinese_to_num, spark_has_it=False, status=_PY),
}


# --- the functions themselves, run in Spark's Python workers ------------------------------

def _cipher(password: str, name: str):
    from Crypto.Cipher import DES

    if len(password) < _MIN_PASSWORD:
        raise ValueError(f"{name}: the password is {len(password)} characters; it must be at least "
                         f"{_MIN_PASSWORD}")
    return DES.new(password.encode("utf-8")[:8], DES.MODE_CBC, iv=_IV)     # Java's DESKeySpec: 8 bytes


def des_encrypt(password: "pd.Series", data: "pd.Series") -> "pd.Series":
    from Crypto.Util.Padding import pad

    def one(key: str, value: str) -> str:
        return base64.b64encode(_cipher(key, "DES_ENCRYPT").encrypt(pad(value.encode("utf-8"), 8))).decode("ascii")
    return _pairs(password, data, one)


def des_decrypt(password: "pd.Series", data: "pd.Series") -> "pd.Series":
    from Crypto.Util.Padding import unpad

    def one(key: str, value: str) -> str:
        cipher = _cipher(key, "DES_DECRYPT")         # a short password fails the job, as SeaTunnel's
        try:
            return unpad(cipher.decrypt(base64.b64decode(value, validate=True)), 8).decode("utf-8")
        except ValueError:                           # not this key's ciphertext: given back as it is
            return value
    return _pairs(password, data, one)


def _pairs(keys: "pd.Series", values: "pd.Series", one) -> "pd.Series":
    import pandas as pd

    return pd.Series([None if k is None or v is None else one(k, v) for k, v in zip(keys, values)], dtype=object)


_DIGITS = dict(zip("零一二三四五六七八九", range(10))) | dict(zip("壹贰叁肆伍陆柒捌玖", range(1, 10)))
_UNITS = {"十": 10, "拾": 10, "百": 100, "佰": 100, "千": 1000, "仟": 1000}
_SECTIONS = (("京", 10 ** 16), ("兆", 10 ** 12), ("亿", 10 ** 8), ("万", 10 ** 4), ("萬", 10 ** 4))


def chinese_number(text: str) -> int | None:
    """一千二百三十四 -> 1234; None for blank text; ValueError naming what is not a numeral."""
    if not text or not text.strip():
        return None
    stray = [c for c in text if c not in _DIGITS and c not in _UNITS and c not in dict(_SECTIONS)]
    if stray:
        raise ValueError(f"CHINESE_TO_NUM: '{text}' holds '{stray[0]}', which is not a Chinese numeral")
    return _section(text.replace("零", ""))


def _section(text: str) -> int:
    for mark, size in _SECTIONS:                   # the largest section unit splits the number
        if mark in text:
            high, _, low = text.partition(mark)
            return (_section(high) if high else 1) * size + _section(low)
    total, digit = 0, None
    for char in text:
        if char in _DIGITS:
            digit = _DIGITS[char]
        else:                                        # 十 alone (十二) counts one ten
            total += (1 if digit is None else digit) * _UNITS[char]
            digit = None
    return total + (digit or 0)


def chinese_to_num(texts: "pd.Series") -> "pd.Series":
    import pandas as pd

    return pd.Series([None if t is None else chinese_number(t) for t in texts], dtype=object)


# name registered in Spark -> (function, Spark return type)
PYTHON_CALLS = {DES_ENCRYPT_UDF: (des_encrypt, "string"), DES_DECRYPT_UDF: (des_decrypt, "string"),
                CHINESE_TO_NUM_UDF: (chinese_to_num, "bigint")}

__all__ = ["PYTHON_CALLS", "ZETA_UDFS", "chinese_number"]
