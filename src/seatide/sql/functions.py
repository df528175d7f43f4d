"""SeaTunnel's SQL function library on Spark SQL: each documented function and what it becomes.

SeaTunnel's Sql transform documents an H2-flavoured function set (``sql-functions.md``).
Each entry of ``FUNCTIONS`` gives a SeaTunnel function its meaning on Spark, as a tree
rewrite of the call:

* ``NATIVE`` - Spark has the function with the same arguments, NULL handling and result
  type: the call passes through unchanged (and runs as a JVM expression);
* a template - Spark SQL with ``{0}``, ``{1}``... for the arguments, one per argument count
  (``LOG(x)`` is ``ln``, ``LOG(b, x)`` is Spark's own); a count not listed is an error when
  the function is SeaTunnel's alone, and passes through when Spark has a form of its own;
* a function - for variadic calls and arguments read at translation (units, regex flags).

``seatide.sql.translate`` applies this library to a query's tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Union

from sqlglot import exp

from seatide.sql.dialect import SeaTunnel, SqlSyntaxError


class SqlFunctionError(SqlSyntaxError):
    """A call that SeaTunnel's function library does not define that way."""


Args = list[exp.Expression]
Rewrite = Callable[[Args], "exp.Expression | None"]
NATIVE: dict[int, str] = {}


@dataclass(frozen=True)
class Function:
    family: str
    forms: Union[dict[int, str], Rewrite] = field(default_factory=dict)
    spark_has_it: bool = True      # other argument counts pass to Spark's function of that name
    status: str = "supported"      # for the docs: supported / differs: ... / not supported: ...


# --- templates -----------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _template(text: str) -> exp.Expression:
    # {0} -> a placeholder column __arg0, replaced by the argument's tree (never re-read as text)
    import re

    return SeaTunnel().parse(re.sub(r"\{(\d+)\}", r"__arg\1", "SELECT " + text))[0].expressions[0]


def fill(text: str, args: Args) -> exp.Expression:
    def put(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table and node.name.startswith("__arg"):
            return args[int(node.name[5:])].copy()
        return node

    return _template(text).copy().transform(put)


def _string(arg: exp.Expression) -> str | None:
    return arg.this if isinstance(arg, exp.Literal) and arg.is_string else None


def _call(name: str, args: Args) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=[a.copy() for a in args])


# --- SeaTunnel functions whose meaning needs more than a template ----------------------------

def _concat(args: Args) -> exp.Expression | None:
    """NULL arguments are skipped, not poisoning the result (all NULL: '')."""
    if not args:
        return None
    parts = [a if _string(a) is not None else fill("coalesce(CAST({0} AS STRING), '')", [a])
             for a in args]
    return _call("concat", parts)


def _concat_ws(args: Args) -> exp.Expression | None:
    if len(args) < 2:
        return None
    rest = [a if _string(a) is not None else fill("CAST({0} AS STRING)", [a]) for a in args[1:]]
    return _call("concat_ws", [fill("coalesce({0}, '')", [args[0]]), *rest])


_UNITS = ("YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND",
          "MILLISECOND", "MICROSECOND")


def _unit(arg: exp.Expression, function: str) -> str | None:
    value = _string(arg)
    if value is None:
        return None
    unit = value.strip().upper()
    if unit not in _UNITS and unit.endswith("S") and unit[:-1] in _UNITS:
        unit = unit[:-1]
    if unit not in _UNITS:
        raise SqlFunctionError(f"{function}: unknown unit '{value}' (use one of {', '.join(_UNITS)})")
    return unit


# Calendar units keep the value's type (DATE stays DATE, TIMESTAMP stays TIMESTAMP), as in H2;
# clock units turn a DATE into a TIMESTAMP.
_ADD_CALENDAR = {
    "YEAR": "({0} + make_ym_interval({1}, 0))",
    "QUARTER": "({0} + make_ym_interval(0, {1} * 3))",
    "MONTH": "({0} + make_ym_interval(0, {1}))",
    "WEEK": "({0} + make_interval(0, 0, {1}))",
    "DAY": "({0} + make_interval(0, 0, 0, {1}))",
}


def _dateadd(args: Args) -> exp.Expression | None:
    """Without a unit, DAY (SeaTunnel's default): a TIMESTAMP stays a TIMESTAMP, where Spark's
    two-argument ``dateadd`` would give a DATE."""
    if len(args) == 2:
        return fill(_ADD_CALENDAR["DAY"], args)
    unit = _unit(args[2], "DATEADD") if len(args) == 3 else None
    if not unit:
        return None
    template = _ADD_CALENDAR.get(unit, f"CAST(timestampadd({unit}, {{1}}, {{0}}) AS TIMESTAMP_NTZ)")
    return fill(template, args)


def _datediff(args: Args) -> exp.Expression | None:
    unit = _unit(args[2], "DATEDIFF") if len(args) == 3 else None
    if not unit:
        return None
    # H2 counts crossed unit boundaries: the difference of both values truncated to the unit
    return fill(f"timestampdiff({unit}, date_trunc('{unit}', {{0}}), date_trunc('{unit}', {{1}}))", args)


def _date_trunc(args: Args) -> exp.Expression | None:
    if len(args) == 2 and _string(args[1]) is not None and _string(args[0]) is None:
        return fill("CAST(date_trunc({1}, {0}) AS TIMESTAMP_NTZ)", args)
    return None


def _flags(regex: exp.Expression, flags_arg: exp.Expression, function: str) -> exp.Expression:
    """H2's flag letters (i, c, n, m) as Java inline flags in front of the regex."""
    if isinstance(flags_arg, exp.Null):
        return regex
    flags = _string(flags_arg)
    if flags is None:
        raise SqlFunctionError(f"{function}: the flags argument must be a string literal such as 'i'")
    inline: set[str] = set()
    for flag in flags:
        if flag == "i":
            inline.add("i")
        elif flag == "c":
            inline.discard("i")
        elif flag in "nm":
            inline.add("s" if flag == "n" else "m")
        else:
            raise SqlFunctionError(f"{function}: unknown flag '{flag}' (flags are i, c, n, m)")
    if not inline:
        return regex
    prefix = "(?" + "".join(sorted(inline)) + ")"
    value = _string(regex)
    return exp.Literal.string(prefix + value) if value is not None else \
        _call("concat", [exp.Literal.string(prefix), regex])


def _regexp_replace(args: Args) -> exp.Expression | None:
    if len(args) != 4 or (_string(args[3]) is None and not isinstance(args[3], exp.Null)):
        return None               # Spark's own 4th argument is a position number
    return _call("regexp_replace", [args[0], _flags(args[1], args[3], "REGEXP_REPLACE"), args[2]])


def _regexp_like(args: Args) -> exp.Expression | None:
    if len(args) != 3:
        return None
    return _call("regexp_like", [args[0], _flags(args[1], args[2], "REGEXP_LIKE")])


def _regexp_substr(args: Args) -> exp.Expression | None:
    if len(args) <= 2:
        return None
    one, zero = exp.Literal.number(1), exp.Literal.number(0)
    position = args[2]
    occurrence = args[3] if len(args) > 3 else one
    regex = _flags(args[1], args[4], "REGEXP_SUBSTR") if len(args) > 4 else args[1]
    group = args[5] if len(args) > 5 else zero
    return fill("try_element_at(regexp_extract_all(substring({0}, {1}), {2}, {3}), {4})",
                [args[0], position, regex, group, occurrence])


# H2's LOCATE with a start: a negative start searches backwards from that many characters
# before the end (Java's lastIndexOf), by a forward search in the reversed strings; 0 is 1.
_LOCATE_FROM = (
    "(CASE WHEN {2} < 0 THEN (CASE WHEN locate(reverse({0}), reverse({1}), "
    "greatest(1, -{2} - char_length({0}) + 1)) = 0 THEN 0 ELSE char_length({1}) - "
    "locate(reverse({0}), reverse({1}), greatest(1, -{2} - char_length({0}) + 1)) "
    "- char_length({0}) + 2 END) ELSE locate({0}, {1}, greatest({2}, 1)) END)")


def _truncate(args: Args) -> exp.Expression | None:
    if len(args) == 2 and _string(args[1]) is not None:
        return None               # Spark's TRUNC(date, 'MM')
    if len(args) == 1:
        return fill("(CASE WHEN {0} >= 0 THEN floor({0}) ELSE ceil({0}) END)", args)
    if len(args) == 2:
        return fill("(CASE WHEN {0} >= 0 THEN floor({0}, {1}) ELSE ceil({0}, {1}) END)", args)
    return None


def _from_unixtime(args: Args) -> exp.Expression | None:
    if len(args) != 3:
        return None
    return fill("date_format(convert_timezone('UTC', {2}, timestampadd(SECOND, CAST({0} AS BIGINT), "
                "TIMESTAMP_NTZ '1970-01-01 00:00:00')), {1})", args)


def _multi_if(args: Args) -> exp.Expression:
    if len(args) < 3 or len(args) % 2 == 0:
        raise SqlFunctionError("MULTI_IF takes condition, value pairs and a final default value "
                               "(an odd number of arguments, at least 3)")
    ifs = [exp.If(this=args[i].copy(), true=args[i + 1].copy()) for i in range(0, len(args) - 1, 2)]
    return exp.Paren(this=exp.Case(ifs=ifs, default=args[-1].copy()))


MOD_BY_ZERO = ("raise_error('MOD: the divisor is 0; SeaTunnel MOD fails on it (choose a value with "
               "CASE WHEN divisor = 0 THEN ... END)')")
S, N, D, C = "string", "numeric", "date and time", "system"
_ROUNDING_TYPE = ("differs: keeps the type of an input field; of a computed FLOAT/DOUBLE/integer "
                  "argument (a + 1) gives Spark's BIGINT")

FUNCTIONS: dict[str, Function] = {
    # string
    "ASCII": Function(S, NATIVE),
    "BIT_LENGTH": Function(S, {1: "CAST(bit_length({0}) AS BIGINT)"}),
    "CHAR_LENGTH": Function(S, {1: "CAST(char_length({0}) AS BIGINT)"}),
    "LENGTH": Function(S, {1: "CAST(char_length({0}) AS BIGINT)"}),
    "OCTET_LENGTH": Function(S, {1: "CAST(octet_length({0}) AS BIGINT)"}),
    "CHAR": Function(S, {1: "chr({0})"}),
    "CHR": Function(S, {1: "chr({0})"}),
    "CONCAT": Function(S, _concat),
    "CONCAT_WS": Function(S, _concat_ws),
    "HEXTORAW": Function(S, {1: "decode(unhex({0}), 'UTF-16BE')"}, spark_has_it=False),
    "RAWTOHEX": Function(S, {1: "lower(hex(encode({0}, 'UTF-16BE')))"}, spark_has_it=False,
                         status="differs: a computed BYTES value (not an input field) is read as text first"),
    "INSERT": Function(S, {4: "overlay({0}, {3}, {1}, {2})"}, spark_has_it=False),
    "LOWER": Function(S, NATIVE), "LCASE": Function(S, NATIVE),
    "UPPER": Function(S, NATIVE), "UCASE": Function(S, NATIVE),
    "LEFT": Function(S, NATIVE), "RIGHT": Function(S, NATIVE),
    "LOCATE": Function(S, {3: _LOCATE_FROM}),
    "INSTR": Function(S, {3: _LOCATE_FROM.replace("{0}", "{x}").replace("{1}", "{0}").replace("{x}", "{1}")}),
    "POSITION": Function(S, NATIVE),
    "LPAD": Function(S, NATIVE), "RPAD": Function(S, NATIVE),
    "LTRIM": Function(S, {2: "trim(LEADING {1} FROM {0})"}),
    "RTRIM": Function(S, {2: "trim(TRAILING {1} FROM {0})"}),
    "TRIM": Function(S, NATIVE),
    "REGEXP_REPLACE": Function(S, _regexp_replace),
    "REGEXP_LIKE": Function(S, _regexp_like),
    "REGEXP_SUBSTR": Function(S, _regexp_substr),
    "REPEAT": Function(S, NATIVE), "REPLACE": Function(S, NATIVE), "SOUNDEX": Function(S, NATIVE),
    "SPACE": Function(S, NATIVE), "SUBSTRING": Function(S, NATIVE), "SUBSTR": Function(S, NATIVE),
    "TO_CHAR": Function(S, {1: "CAST({0} AS STRING)", 2: "date_format({0}, {1})"},
                        status="differs: with a format, formats dates and timestamps only "
                               "(Java DateTimeFormatter patterns), not numbers"),
    "TRANSLATE": Function(S, NATIVE),
    # numeric: the trigonometric, exponential and logarithmic functions return DOUBLE in Spark too
    "ABS": Function(N, NATIVE),
    **{name: Function(N, NATIVE) for name in (
        "ACOS", "ASIN", "ATAN", "COS", "COSH", "COT", "SIN", "SINH", "TAN", "TANH", "EXP", "LN",
        "LOG10", "RADIANS", "SQRT", "PI", "POWER", "ROUND")},
    "RAND": Function(N, NATIVE, status="differs: a seed makes this call's sequence repeatable; it "
                                       "does not reseed the session"),
    "RANDOM": Function(N, NATIVE, status="differs: a seed makes this call's sequence repeatable; it "
                                         "does not reseed the session"),
    "MOD": Function(N, {2: f"(CASE WHEN {{1}} = 0 THEN {MOD_BY_ZERO} ELSE {{0}} % {{1}} END)"}),   # and translate
    "CEIL": Function(N, NATIVE, status=_ROUNDING_TYPE),
    "CEILING": Function(N, NATIVE, status=_ROUNDING_TYPE),
    "FLOOR": Function(N, NATIVE, status=_ROUNDING_TYPE),
    "LOG": Function(N, {1: "ln({0})"}),
    "SIGN": Function(N, {1: "CAST(signum({0}) AS INT)"}),
    "TRUNC": Function(N, _truncate, status=_ROUNDING_TYPE),
    "TRUNCATE": Function(N, _truncate, spark_has_it=False,
                         status=_ROUNDING_TYPE),
    # date and time
    "CURRENT_DATE": Function(D, NATIVE),
    "CURRENT_TIME": Function(D, NATIVE),
    "CURRENT_TIMESTAMP": Function(D, {0: "localtimestamp()"}),
    "NOW": Function(D, {0: "localtimestamp()"}),
    "DATEADD": Function(D, _dateadd), "TIMESTAMPADD": Function(D, _dateadd),
    "DATEDIFF": Function(D, _datediff),
    "DATE_TRUNC": Function(D, _date_trunc),
    "DAYNAME": Function(D, {1: "date_format({0}, 'EEEE')"}, spark_has_it=False),
    "DAY_OF_MONTH": Function(D, {1: "dayofmonth({0})"}, spark_has_it=False),
    "DAY_OF_WEEK": Function(D, {1: "(weekday({0}) + 1)"}, spark_has_it=False),
    "DAY_OF_YEAR": Function(D, {1: "dayofyear({0})"}, spark_has_it=False),
    "EXTRACT": Function(D, NATIVE),
    "FORMATDATETIME": Function(D, {2: "date_format({0}, {1})"}, spark_has_it=False),
    "HOUR": Function(D, NATIVE), "MINUTE": Function(D, NATIVE), "MONTH": Function(D, NATIVE),
    "MONTHNAME": Function(D, {1: "date_format({0}, 'MMMM')"}, spark_has_it=False),
    "IS_DATE": Function(D, {2: "(try_to_timestamp({0}, {1}) IS NOT NULL)"}, spark_has_it=False),
    "PARSEDATETIME": Function(D, {2: "to_timestamp_ntz({0}, {1})"}, spark_has_it=False,
                              status="differs: a TIMESTAMP without time zone"),
    "TO_DATE": Function(D, {2: "to_timestamp_ntz({0}, {1})"},
                        status="differs: a TIMESTAMP without time zone"),
    "QUARTER": Function(D, NATIVE), "SECOND": Function(D, NATIVE),
    "WEEK": Function(D, {1: "weekofyear({0})"}, spark_has_it=False,
                     status="differs: ISO weeks (Monday first), not the system locale's"),
    "YEAR": Function(D, NATIVE),
    "FROM_UNIXTIME": Function(D, _from_unixtime),
    # system
    "CAST": Function(C, NATIVE), "CONVERT": Function(C, NATIVE),
    "COALESCE": Function(C, NATIVE), "IFNULL": Function(C, NATIVE), "NULLIF": Function(C, NATIVE),
    "NVL": Function(C, NATIVE), "CASE": Function(C, NATIVE), "UUID": Function(C, NATIVE),
    "MULTI_IF": Function(C, _multi_if, spark_has_it=False),
}

# EXTRACT fields whose Spark meaning or type differs from SeaTunnel's (an INT, EPOCH numeric)
EXTRACT_FIELDS = {
    "SECOND": "second({0})",
    "DOW": "(extract(DOW FROM {0}) - 1)",
    "DAYOFWEEK": "(extract(DOW FROM {0}) - 1)",
    "DAY_OF_WEEK": "(extract(DOW FROM {0}) - 1)",
    "ISODOW": "extract(DOW_ISO FROM {0})",
    "ISO_DAY_OF_WEEK": "extract(DOW_ISO FROM {0})",
    "ISOYEAR": "extract(YEAROFWEEK FROM {0})",
    "ISO_WEEK_YEAR": "extract(YEAROFWEEK FROM {0})",
    "ISO_WEEK": "extract(WEEK FROM {0})",
    "DAY_OF_YEAR": "extract(DOY FROM {0})",
    "DAYOFYEAR": "extract(DOY FROM {0})",
    "EPOCH": "(unix_micros(CAST({0} AS TIMESTAMP)) / 1000000)",
    "CENTURY": "CAST(ceil(year({0}) / 100) AS INT)",
    "DECADE": "CAST(floor(year({0}) / 10) AS INT)",
    "MILLENNIUM": "CAST(ceil(year({0}) / 1000) AS INT)",
    "MILLISECOND": "(CAST(floor(extract(SECOND FROM {0}) * 1000) AS INT) % 1000)",
    "MICROSECOND": "(CAST(floor(extract(SECOND FROM {0}) * 1000000) AS INT) % 1000000)",
    "NANOSECOND": "(CAST(floor(extract(SECOND FROM {0}) * 1000000) AS BIGINT) % 1000000 * 1000)",
}
EXTRACT_FIELDS["MILLISECONDS"] = EXTRACT_FIELDS["MILLISECOND"]
EXTRACT_FIELDS["MICROSECONDS"] = EXTRACT_FIELDS["MICROSECOND"]


__all__ = ["EXTRACT_FIELDS", "FUNCTIONS", "MOD_BY_ZERO", "Function", "SqlFunctionError", "fill"]
