"""Translate a parsed SeaTunnel query: every call gets its meaning from ``seatide.sql.functions``.

Calls are rewritten innermost first, so a template's arguments are already Spark SQL.
CAST types and EXTRACT fields get SeaTunnel's meaning too. A call to a name that neither
SeaTunnel's library, Spark's built-in functions nor the transform's UDFs know is an error
naming it and the closest known name (at validation, before Spark starts).
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Callable

from sqlglot import exp

from seatide.sql.crypto import CRYPTO_FUNCTIONS
from seatide.sql.functions import EXTRACT_FIELDS, FUNCTIONS, MOD_BY_ZERO, SqlFunctionError, fill
from seatide.sql.spark_builtins import SPARK_FUNCTIONS
from seatide.sql.zeta_udfs import ZETA_UDFS

# SeaTunnel's reference, its built-in Zeta UDFs, then the UDFs its deployments add
LIBRARY = {**FUNCTIONS, **ZETA_UDFS, **CRYPTO_FUNCTIONS}

if TYPE_CHECKING:
    from pyspark.sql.types import DataType


def translate_calls(tree: exp.Expression, udfs: dict[str, str],
                    types: "Callable[[exp.Expression], DataType | None] | None" = None) -> exp.Expression:
    """Give every call in ``tree`` its SeaTunnel meaning on Spark (innermost first).

    ``udfs`` maps a UDF's SQL name (upper case) to the name it is registered under in Spark.
    ``types`` (an expression's Spark type, as far as the input's schema tells it:
    ``sql.arithmetic.ExpressionTypes``), known once the input is, lets rounding functions keep
    their argument's type (see ``_keeps_type``).
    """
    for node in reversed(list(tree.walk())):      # children before their parents
        new = _translate(node, udfs)
        if types is not None:
            new = _bytes_to_hex(node, new, types)
            new = _keeps_type(node, new, types)
            new = _mod_in_decimal(node, new, types)
        if new is not None and new is not node:
            if node is tree:
                tree = new
            else:
                node.replace(new)
    return tree


def _translate(node: exp.Expression, udfs: dict[str, str]) -> exp.Expression | None:
    if isinstance(node, exp.Cast):
        _seatunnel_type(node.to)
        return None
    if isinstance(node, exp.CurrentTimestamp):
        return fill("localtimestamp()", [])
    if isinstance(node, exp.Extract):
        template = EXTRACT_FIELDS.get(node.this.name.upper())
        return fill(template, [node.expression]) if template else None
    if not isinstance(node, exp.Anonymous) or node.find_ancestor(exp.Hint):
        return None               # optimizer hints (/*+ REPARTITION(2) */) are not calls
    name = node.name.upper()
    if name in udfs:
        return exp.Anonymous(this=udfs[name], expressions=node.expressions)
    args = list(node.expressions)
    function = LIBRARY.get(name)
    if function is None:
        if node.name.lower() not in SPARK_FUNCTIONS:
            raise SqlFunctionError(_unknown(node.name, udfs))
        return None
    if callable(function.forms):
        return function.forms(args)
    template = function.forms.get(len(args))
    if template is not None:
        return fill(template, args)
    if function.forms and not function.spark_has_it:
        counts = " or ".join(str(n) for n in sorted(function.forms))
        raise SqlFunctionError(f"{name} takes {counts} argument{'s' if counts != '1' else ''}, "
                               f"not {len(args)}")
    return None


_ROUNDING = ("CEIL", "CEILING", "FLOOR", "TRUNC", "TRUNCATE", "ROUND")
_INTEGERS = ("int", "smallint", "tinyint", "bigint")
_KEPT_TYPES = ("double", "float", *_INTEGERS)


def _keeps_type(node: exp.Expression, new: exp.Expression | None,
                types: "Callable[[exp.Expression], DataType | None]") -> exp.Expression | None:
    """CEIL, FLOOR, TRUNC and ROUND of a FLOAT, DOUBLE or integer keep their argument's type,
    with or without digits, as SeaTunnel's function page says; Spark returns BIGINT (or, with
    digits, a DECIMAL). A decimal argument keeps Spark's type, which adjusts precision and scale
    as the page says. An argument whose type ``types`` does not know keeps Spark's type.
    """
    if isinstance(node, (exp.Ceil, exp.Floor)):
        args = [node.this]
    elif isinstance(node, exp.Anonymous) and node.name.upper() in _ROUNDING:
        args = list(node.expressions)
    else:
        return new
    kind = types(args[0]) if args else None
    if kind is None or kind.simpleString() not in _KEPT_TYPES:
        return new
    return exp.Cast(this=(new if new is not None else node).copy(), to=exp.DataType.build(kind.simpleString()))


_FRACTIONAL = ("float", "double")


def _mod_in_decimal(node: exp.Expression, new: exp.Expression | None,
                    types: "Callable[[exp.Expression], DataType | None]") -> exp.Expression | None:
    """MOD of a FLOAT or DOUBLE in decimal, as SeaTunnel computes it: each number as Java writes
    it (``5.4``, not the binary fraction nearest to it), so ``MOD(13, 5.4)`` is 2.2, where the
    remainder of the doubles is 2.1999999999999993. The result keeps Spark's type for ``a % b``
    (DOUBLE, or FLOAT of FLOATs and integers). A number a DECIMAL(38, 18) cannot hold exactly
    (1e300, 3e-20, NaN) takes the remainder of the doubles, which overflows nothing. Integers and
    decimals keep Spark's own remainder, exact already."""
    if not (isinstance(node, exp.Anonymous) and node.name.upper() == "MOD" and len(node.expressions) == 2):
        return new
    kinds = [types(arg) for arg in node.expressions]
    if any(k is None for k in kinds):
        return new
    names = [k.simpleString() for k in kinds]
    if not any(n in _FRACTIONAL for n in names):
        return new
    result = "FLOAT" if all(n == "float" or n in _INTEGERS for n in names) else "DOUBLE"
    exact, decimal = [], []
    for i, name in enumerate(names):
        if name in _FRACTIONAL:    # Java's shortest text of the double, as BigDecimal.valueOf reads it
            decimal.append(f"try_cast(CAST(CAST({{{i}}} AS DOUBLE) AS STRING) AS DECIMAL(38, 18))")
            exact.append(f"CAST({decimal[i]} AS DOUBLE) = CAST({{{i}}} AS DOUBLE)")
        else:
            decimal.append(f"try_cast({{{i}}} AS DECIMAL(38, 18))")
            exact.append(f"{decimal[i]} IS NOT NULL")
    return fill(f"(CASE WHEN {{1}} = 0 THEN {MOD_BY_ZERO} WHEN {exact[0]} AND {exact[1]} "
                f"THEN CAST({decimal[0]} % {decimal[1]} AS {result}) ELSE CAST({{0}} % {{1}} AS {result}) END)",
                list(node.expressions))


def _bytes_to_hex(node: exp.Expression, new: exp.Expression | None,
                  types: "Callable[[exp.Expression], DataType | None]") -> exp.Expression | None:
    """RAWTOHEX of a BYTES field: two hex digits a byte (text gets four a character)."""
    if not (isinstance(node, exp.Anonymous) and node.name.upper() == "RAWTOHEX"
            and len(node.expressions) == 1):
        return new
    kind = types(node.expressions[0])
    if kind is None or kind.simpleString() != "binary":
        return new
    return fill("lower(hex({0}))", list(node.expressions))


def _seatunnel_type(to: exp.DataType) -> None:
    """SeaTunnel's TIMESTAMP has no time zone (Spark's TIMESTAMP_NTZ); TIME is Spark's TIME."""
    if to.this == exp.DataType.Type.TIMESTAMPTZ:       # how sqlglot reads Spark's TIMESTAMP
        to.set("this", exp.DataType.Type.TIMESTAMPNTZ)
    elif to.this == exp.DataType.Type.TIME:            # sqlglot would write Spark's TIMESTAMP
        to.replace(exp.DataType(this=exp.DataType.Type.USERDEFINED, kind="TIME"))


def known_names(udfs: dict[str, str] = {}) -> list[str]:     # noqa: B006 - read only
    return sorted(set(LIBRARY) | {n.upper() for n in SPARK_FUNCTIONS} | set(udfs))


def _unknown(name: str, udfs: dict[str, str]) -> str:
    close = difflib.get_close_matches(name.upper(), known_names(udfs), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else \
        "; see docs/sql.md for SeaTunnel's functions, or declare a Python UDF (option 'udfs')"
    return f"unknown function {name}{hint}"


__all__ = ["known_names", "translate_calls"]
