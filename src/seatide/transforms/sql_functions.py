"""SeaTunnel SQL functions -> Spark SQL: the calls whose name or meaning differ.

SeaTunnel's Sql transform documents an H2-flavoured function set. Most names exist in
Spark with the same meaning; this module rewrites the calls that do not, so a SeaTunnel
query runs unchanged:

* missing in Spark: ``MULTI_IF``, ``DAYNAME``/``MONTHNAME`` (full English names),
  ``DAY_OF_MONTH``/``DAY_OF_WEEK``/``DAY_OF_YEAR``, ``WEEK``, ``FORMATDATETIME``,
  ``PARSEDATETIME``, ``IS_DATE``, ``HEXTORAW``/``RAWTOHEX``, ``INSERT``, numeric ``TRUNC``;
* same name, other meaning: ``CONCAT``/``CONCAT_WS`` skip NULLs, ``LTRIM/RTRIM/TRIM(s, chars)``
  (Spark reads the arguments the other way round), ``INSTR`` with a start,
  ``REGEXP_REPLACE/LIKE/SUBSTR`` with flags, position, occurrence or group,
  ``DATEADD``/``TIMESTAMPADD``/``DATEDIFF`` with a unit string, ``DATE_TRUNC(value, unit)``,
  ``TO_DATE(s, format)`` (a timestamp), ``TO_CHAR(value)``, ``FROM_UNIXTIME`` with a zone,
  ``EXTRACT`` fields (``DOW`` counts from Sunday = 0, ``EPOCH``, ``ISODOW``, ...);
* type names in ``CAST``/``TRY_CAST``: ``BYTES`` and ``VARCHAR``.

Not supported (Spark reports them as unknown): ``TRIM_SCALE``. Rewrites run on tokens, so
text inside literals and comments is never touched.
"""

from __future__ import annotations

import re
from typing import Callable

from seatide.transforms.sql_text import SqlSyntaxError, Token, significant, tokenize

Rule = Callable[[list[str]], "str | None"]

_UNITS = ("YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND",
          "MILLISECOND", "MICROSECOND")


class SqlRewriteError(SqlSyntaxError):
    """A SeaTunnel function call that cannot be expressed in Spark SQL."""


def rewrite_calls(tokens: list[Token]) -> str:
    """Rewrite every SeaTunnel-only call in ``tokens`` (innermost first); return the text."""
    out: list[str] = []
    prev: Token | None = None
    i, n = 0, len(tokens)
    while i < n:
        token = tokens[i]
        paren = _next_significant(tokens, i + 1)
        if (token.kind == "ident" and paren is not None and tokens[paren].text == "("
                and tokens[paren].kind == "op" and not (prev is not None and prev.text == ".")):
            close = _matching(tokens, paren)
            args = [rewrite_calls(arg).strip() for arg in _split_args(tokens[paren + 1:close])]
            rule = _RULES.get(token.upper)
            text = rule(args) if rule else None
            out.append(text if text is not None else f"{token.text}({', '.join(args)})")
            prev, i = tokens[close], close + 1
            continue
        out.append(token.text)
        prev = token if token.kind != "ws" else prev
        i += 1
    return "".join(out)


def _next_significant(tokens: list[Token], i: int) -> int | None:
    while i < len(tokens) and tokens[i].kind == "ws":
        i += 1
    return i if i < len(tokens) else None


def _matching(tokens: list[Token], open_idx: int) -> int:
    depth = 0
    for i in range(open_idx, len(tokens)):
        if tokens[i].kind == "op" and tokens[i].text == "(":
            depth += 1
        elif tokens[i].kind == "op" and tokens[i].text == ")":
            depth -= 1
            if depth == 0:
                return i
    raise SqlSyntaxError("a '(' is never closed with ')'")


def _split_args(tokens: list[Token]) -> list[list[Token]]:
    if not significant(tokens):
        return []
    args: list[list[Token]] = [[]]
    depth = 0
    for token in tokens:
        if token.kind == "op" and token.text in "()":
            depth += 1 if token.text == "(" else -1
        if token.kind == "op" and token.text == "," and depth == 0:
            args.append([])
            continue
        args[-1].append(token)
    return args


# --- argument helpers -------------------------------------------------------------------

def _string_value(arg: str) -> str | None:
    """The value of ``arg`` when it is one Spark string literal (as normalized upstream)."""
    tokens = [t for t in tokenize(arg) if t.kind != "ws"]
    if len(tokens) != 1 or tokens[0].kind != "str":
        return None
    return re.sub(r"\\(.)", r"\1", tokens[0].text[1:-1], flags=re.DOTALL)


def _spark_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _as_text(arg: str) -> str:
    return arg if _string_value(arg) is not None else f"CAST({arg} AS STRING)"


def _unit(arg: str, function: str) -> str | None:
    value = _string_value(arg)
    if value is None:
        return None
    unit = value.strip().upper()
    if unit not in _UNITS and unit.endswith("S") and unit[:-1] in _UNITS:
        unit = unit[:-1]
    if unit not in _UNITS:
        raise SqlRewriteError(f"{function}: unknown unit '{value}' (use one of {', '.join(_UNITS)})")
    return unit


def _with_flags(regex: str, flags_arg: str, function: str) -> str:
    """Java's inline flags for H2's flag letters: i, c (case-sensitive), n (dotall), m."""
    if flags_arg.strip().upper() == "NULL":
        return regex
    flags = _string_value(flags_arg)
    if flags is None:
        raise SqlRewriteError(f"{function}: the flags argument must be a string literal such as 'i'")
    inline: set[str] = set()
    for flag in flags:
        if flag == "i":
            inline.add("i")
        elif flag == "c":
            inline.discard("i")
        elif flag in "nm":
            inline.add("s" if flag == "n" else "m")
        else:
            raise SqlRewriteError(f"{function}: unknown flag '{flag}' (flags are i, c, n, m)")
    if not inline:
        return regex
    prefix = "(?" + "".join(sorted(inline)) + ")"
    value = _string_value(regex)
    return _spark_string(prefix + value) if value is not None else f"concat('{prefix}', {regex})"


# --- rules: each returns Spark SQL text, or None to keep the call as written ------------

def _concat(args: list[str]) -> str | None:
    if not args:
        return None
    parts = [a if _string_value(a) is not None else f"coalesce(CAST({a} AS STRING), '')" for a in args]
    return f"concat({', '.join(parts)})"


def _concat_ws(args: list[str]) -> str | None:
    if len(args) < 2:
        return None
    return f"concat_ws(coalesce({args[0]}, ''), {', '.join(_as_text(a) for a in args[1:])})"


def _trim(side: str) -> Rule:
    return lambda a: f"trim({side} {a[1]} FROM {a[0]})" if len(a) == 2 else None


def _regexp_replace(a: list[str]) -> str | None:
    if len(a) != 4 or _string_value(a[3]) is None:
        return None               # Spark's own 4th argument is a position number
    return f"regexp_replace({a[0]}, {_with_flags(a[1], a[3], 'REGEXP_REPLACE')}, {a[2]})"


def _regexp_like(a: list[str]) -> str | None:
    if len(a) != 3:
        return None
    return f"regexp_like({a[0]}, {_with_flags(a[1], a[2], 'REGEXP_LIKE')})"


def _regexp_substr(a: list[str]) -> str | None:
    if len(a) <= 2:
        return None
    position = a[2] if len(a) > 2 else "1"
    occurrence = a[3] if len(a) > 3 else "1"
    regex = _with_flags(a[1], a[4], "REGEXP_SUBSTR") if len(a) > 4 else a[1]
    group = a[5] if len(a) > 5 else "0"
    return (f"try_element_at(regexp_extract_all(substring({a[0]}, {position}), {regex}, {group}), "
            f"{occurrence})")


def _truncate(a: list[str]) -> str | None:
    if len(a) == 2 and _string_value(a[1]) is not None:
        return None               # Spark's TRUNC(date, 'MM')
    digits = f", {a[1]}" if len(a) == 2 else ""
    return f"(CASE WHEN {a[0]} >= 0 THEN floor({a[0]}{digits}) ELSE ceil({a[0]}{digits}) END)"


def _dateadd(a: list[str]) -> str | None:
    unit = _unit(a[2], "DATEADD") if len(a) == 3 else None
    return f"timestampadd({unit}, {a[1]}, {a[0]})" if unit else None


def _datediff(a: list[str]) -> str | None:
    unit = _unit(a[2], "DATEDIFF") if len(a) == 3 else None
    if not unit:
        return None
    # H2 counts crossed unit boundaries: difference of the values truncated to the unit.
    return f"timestampdiff({unit}, date_trunc('{unit}', {a[0]}), date_trunc('{unit}', {a[1]}))"


def _date_trunc(a: list[str]) -> str | None:
    if len(a) == 2 and _string_value(a[1]) is not None and _string_value(a[0]) is None:
        return f"date_trunc({a[1]}, {a[0]})"
    return None


def _from_unixtime(a: list[str]) -> str | None:
    if len(a) != 3:
        return None
    utc = f"timestampadd(SECOND, CAST({a[0]} AS BIGINT), TIMESTAMP_NTZ'1970-01-01 00:00:00')"
    return f"date_format(convert_timezone('UTC', {a[2]}, {utc}), {a[1]})"


_EXTRACT = {
    "DOW": "(extract(DOW FROM {x}) - 1)",
    "DAYOFWEEK": "(extract(DOW FROM {x}) - 1)",
    "ISODOW": "extract(DOW_ISO FROM {x})",
    "ISOYEAR": "extract(YEAROFWEEK FROM {x})",
    "EPOCH": "(unix_micros(CAST({x} AS TIMESTAMP)) / 1000000)",
    "CENTURY": "CAST(ceil(year({x}) / 100) AS INT)",
    "DECADE": "CAST(floor(year({x}) / 10) AS INT)",
    "MILLENNIUM": "CAST(ceil(year({x}) / 1000) AS INT)",
    "MILLISECONDS": "(extract(SECOND FROM {x}) * 1000)",
    "MICROSECONDS": "CAST(extract(SECOND FROM {x}) * 1000000 AS BIGINT)",
}


def _extract(a: list[str]) -> str | None:
    match = re.fullmatch(r"\s*(\w+)\s+FROM\s+(.+)", a[0], re.IGNORECASE | re.DOTALL) if len(a) == 1 else None
    if not match or match.group(1).upper() not in _EXTRACT:
        return None
    return _EXTRACT[match.group(1).upper()].format(x=match.group(2).strip())


_TYPE_NAMES = {"BYTES": "BINARY", "VARCHAR": "STRING", "TEXT": "STRING"}


def _cast(function: str) -> Rule:
    def rule(a: list[str]) -> str | None:
        match = re.fullmatch(r"(.*\S)\s+AS\s+([A-Za-z_]\w*)\s*(\(.*\))?\s*", a[0], re.IGNORECASE | re.DOTALL) \
            if len(a) == 1 else None
        if not match or match.group(2).upper() not in _TYPE_NAMES:
            return None
        return f"{function}({match.group(1)} AS {_TYPE_NAMES[match.group(2).upper()]})"
    return rule


def _multi_if(a: list[str]) -> str | None:
    if len(a) < 3 or len(a) % 2 == 0:
        raise SqlRewriteError("MULTI_IF takes condition, value pairs and a final default value "
                              "(an odd number of arguments, at least 3)")
    pairs = " ".join(f"WHEN {a[i]} THEN {a[i + 1]}" for i in range(0, len(a) - 1, 2))
    return f"(CASE {pairs} ELSE {a[-1]} END)"


def _fixed(template: str, arity: int) -> Rule:
    return lambda a: template.format(*a) if len(a) == arity else None


_RULES: dict[str, Rule] = {
    "CONCAT": _concat,
    "CONCAT_WS": _concat_ws,
    "INSERT": _fixed("overlay({0}, {3}, {1}, {2})", 4),
    "INSTR": _fixed("locate({1}, {0}, {2})", 3),
    "TRIM": _trim("BOTH"),
    "LTRIM": _trim("LEADING"),
    "RTRIM": _trim("TRAILING"),
    "REGEXP_REPLACE": _regexp_replace,
    "REGEXP_LIKE": _regexp_like,
    "REGEXP_SUBSTR": _regexp_substr,
    "HEXTORAW": _fixed("decode(unhex({0}), 'UTF-16BE')", 1),
    "RAWTOHEX": _fixed("lower(hex(encode({0}, 'UTF-16BE')))", 1),
    "TO_CHAR": _fixed("CAST({0} AS STRING)", 1),
    "TRUNC": _truncate,
    "TRUNCATE": _truncate,
    "DATEADD": _dateadd,
    "TIMESTAMPADD": _dateadd,
    "DATEDIFF": _datediff,
    "DATE_TRUNC": _date_trunc,
    "DAYNAME": _fixed("date_format({0}, 'EEEE')", 1),
    "MONTHNAME": _fixed("date_format({0}, 'MMMM')", 1),
    "DAY_OF_MONTH": _fixed("dayofmonth({0})", 1),
    "DAY_OF_WEEK": _fixed("(weekday({0}) + 1)", 1),
    "DAY_OF_YEAR": _fixed("dayofyear({0})", 1),
    "WEEK": _fixed("weekofyear({0})", 1),
    "EXTRACT": _extract,
    "FORMATDATETIME": _fixed("date_format({0}, {1})", 2),
    "PARSEDATETIME": _fixed("to_timestamp_ntz({0}, {1})", 2),
    "TO_DATE": _fixed("to_timestamp_ntz({0}, {1})", 2),
    "IS_DATE": _fixed("(try_to_timestamp({0}, {1}) IS NOT NULL)", 2),
    "FROM_UNIXTIME": _from_unixtime,
    "CAST": _cast("CAST"),
    "TRY_CAST": _cast("TRY_CAST"),
    "MULTI_IF": _multi_if,
}


__all__ = ["SqlRewriteError", "rewrite_calls"]
