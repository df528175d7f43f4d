"""Names the LocalFile sink gives its output: SeaTunnel's ``${...}`` expressions.

File names follow ``file_name_expression`` (``${transactionId}``, ``${now}``, ``${uuid}``)
with ``${now}`` formatted by ``filename_time_format``, a Java ``SimpleDateFormat`` pattern.
Partition directories follow ``partition_dir_expression`` (``${k0}=${v0}/${k1}=${v1}``).

Every file name carries the batch's transaction id: a replayed batch then produces the
same names (or names its intent lists), never names that add to the output.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime

_VARIABLE = re.compile(r"\$\{([^}]*)\}")
FILE_VARIABLES = ("transactionId", "now", "uuid")
_PARTITION_VARIABLE = re.compile(r"^([kv])(\d+)$")


def variables(expression: str) -> list[str]:
    return _VARIABLE.findall(expression)


# --- Java SimpleDateFormat -------------------------------------------------------------

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _field(letter: str, width: int, at: datetime) -> str:
    if letter in "yu":
        return f"{at.year % 100:02d}" if width == 2 else f"{at.year:0{width}d}"
    if letter == "M":
        if width >= 4:
            return _MONTHS[at.month - 1]
        return _MONTHS[at.month - 1][:3] if width == 3 else f"{at.month:0{width}d}"
    if letter == "E":
        name = _DAYS[at.weekday()]
        return name if width >= 4 else name[:3]
    if letter == "a":
        return "AM" if at.hour < 12 else "PM"
    if letter == "S":   # fraction of a second, most significant digits first
        return f"{at.microsecond:06d}"[:width].ljust(width, "0")
    if letter == "h":
        return f"{(at.hour % 12) or 12:0{width}d}"
    numbers = {"d": at.day, "H": at.hour, "m": at.minute, "s": at.second, "D": at.timetuple().tm_yday}
    return f"{numbers[letter]:0{width}d}"


_LETTERS = set("yuMEadHhmsSD")


def _tokens(pattern: str) -> list[tuple[str, str | int]]:
    """('lit', text) and (letter, width) tokens of a SimpleDateFormat pattern."""
    tokens: list[tuple[str, str | int]] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "'":
            end = pattern.find("'", i + 1)
            if end < 0:
                raise ValueError(f"unclosed quote in time format '{pattern}'")
            tokens.append(("lit", pattern[i + 1:end] or "'"))
            i = end + 1
        elif ch.isalpha():
            j = i
            while j < len(pattern) and pattern[j] == ch:
                j += 1
            if ch not in _LETTERS:
                raise ValueError(f"time format '{pattern}' uses '{ch}', which SeaTide does not "
                                 f"support (supported letters: {''.join(sorted(_LETTERS))})")
            tokens.append((ch, j - i))
            i = j
        else:
            tokens.append(("lit", ch))
            i += 1
    return tokens


def check_time_format(pattern: str) -> None:
    """Raise ValueError naming what is wrong with a SimpleDateFormat pattern."""
    _tokens(pattern)


def format_time(pattern: str, at: datetime) -> str:
    return "".join(str(value) if kind == "lit" else _field(kind, int(value), at)
                   for kind, value in _tokens(pattern))


# --- file names ------------------------------------------------------------------------

@dataclass(frozen=True)
class FileNamer:
    """Base names of one batch's files; ``expression`` None means ``${transactionId}``."""

    expression: str | None
    time_format: str

    def check(self) -> None:
        if self.expression is None:
            return
        for name in variables(self.expression):
            if name not in FILE_VARIABLES and name != self.time_format:
                known = ", ".join("${" + v + "}" for v in FILE_VARIABLES)
                raise ValueError(f"unknown variable ${{{name}}} in '{self.expression}' (known: {known})")
        check_time_format(self.time_format)

    def base(self, transaction_id: str, at: datetime) -> str:
        txn = re.sub(r"[^A-Za-z0-9._=-]", "_", transaction_id)
        if self.expression is None:
            return txn
        now = format_time(self.time_format, at)
        values = {"transactionId": txn, "now": now, "uuid": str(uuid.uuid4()), self.time_format: now}
        text = _VARIABLE.sub(lambda m: values[m.group(1)], self.expression)
        # As in SeaTunnel: the transaction id heads names that lack it, so batches never collide.
        return text if "${transactionId}" in self.expression else f"{txn}_{text}"


# --- partition directories -------------------------------------------------------------

def check_partition_expression(expression: str, partition_count: int) -> None:
    for name in variables(expression):
        match = _PARTITION_VARIABLE.match(name)
        if not match:
            raise ValueError(f"unknown variable ${{{name}}} in '{expression}' "
                             "(use ${k0} for the first partition field's name, ${v0} for its value)")
        if int(match.group(2)) >= partition_count:
            raise ValueError(f"${{{name}}} in '{expression}' names partition field "
                             f"{match.group(2)}, but partition_by has {partition_count} field(s) "
                             f"(numbered from 0)")
    parts = [p for p in expression.split("/") if p]
    if expression.startswith("/") or ".." in parts:
        raise ValueError(f"'{expression}' must be a relative directory inside path, without '..'")


# What Spark's writer names a directory whose partition value is NULL or ''; the values given to
# it are SeaTunnel's text (never NULL: ``partition_text``), so only '' comes back as this.
SPARK_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def partition_text(column, data_type):
    """The text SeaTunnel names a partition directory by (the value's Java ``toString``), as a
    Spark column: a timestamp ``2024-01-02T03:04:05`` (seconds and fractions only when not
    zero, the fraction in groups of three digits), a time alike, ``null`` for NULL; other
    types as Spark writes them as text, which is Java's for numbers, dates and booleans."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from seatide.plugin.types import map_keys_as

    if isinstance(data_type, (T.TimestampNTZType, T.TimestampType, T.TimeType)):
        date = "" if isinstance(data_type, T.TimeType) else "yyyy-MM-dd'T'"
        micros = F.date_format(column, "SSSSSS").cast("int")
        text = (F.when((F.date_format(column, "ss") == "00") & (micros == 0), F.date_format(column, date + "HH:mm"))
                .when(micros == 0, F.date_format(column, date + "HH:mm:ss"))
                .when(micros % 1000 == 0, F.date_format(column, date + "HH:mm:ss.SSS"))
                .otherwise(F.date_format(column, date + "HH:mm:ss.SSSSSS")))
    elif isinstance(data_type, (T.ArrayType, T.MapType, T.StructType)):
        text = F.to_json(map_keys_as(column, data_type, to_text=True))
    else:
        text = column.cast("string")
    return F.coalesce(text, F.lit("null"))


def partition_value(directory_name: str) -> str:
    """A value back from the ``key=value`` directory name Spark's writer gave it (it escapes
    ``:``, ``/``, ``%`` and the like as ``%XX``)."""
    from urllib.parse import unquote

    value = directory_name.split("=", 1)[1]
    return "" if value == SPARK_DEFAULT_PARTITION else unquote(value)


def partition_dir(expression: str | None, keys: list[str], values: list[str]) -> str:
    """Directory (relative to the sink's path) for one combination of partition values."""
    if expression is None:
        return "/".join(f"{k}={v}" for k, v in zip(keys, values))
    table = {f"k{i}": k for i, k in enumerate(keys)} | {f"v{i}": v for i, v in enumerate(values)}
    text = _VARIABLE.sub(lambda m: table[m.group(1)], expression)
    return "/".join(p for p in text.split("/") if p)
