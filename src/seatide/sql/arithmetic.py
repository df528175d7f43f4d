"""SeaTunnel's numbers and casts on Spark: literal types, arithmetic result types, epoch casts.

Spark and SeaTunnel's SQL engine type the same expression differently, and a job's Assert
(or its sink's columns) sees the difference:

* a literal with a decimal point (``1.5``) is a DOUBLE in SeaTunnel, a DECIMAL in Spark;
* ``a op b`` (``+ - * / %``) is, in SeaTunnel: INT when both sides are TINYINT, SMALLINT or
  INT (so ``7 / 2`` is 3, an integer division); BIGINT when one side is BIGINT and the other
  an integer; ``DECIMAL(max precision, max scale)`` when either side is a DECIMAL; DOUBLE when
  either side is a FLOAT or DOUBLE. Spark divides integers into a DOUBLE, widens decimals and
  keeps FLOAT;
* ``CAST(x AS TIMESTAMP)`` of a BIGINT reads epoch milliseconds (local time), of an INT
  ``CAST(x AS DATE)`` reads ``yyyyMMdd`` and ``CAST(x AS TIME)`` ``HHmmss``; Spark refuses all
  three.

``seatunnel_numbers`` rewrites a parsed query so that Spark computes SeaTunnel's types. The
types of the operands come from the input's schema (fields, nested fields, map values, array
items), literals and casts; an operand whose type that does not tell (a function's result, a
subquery's field) leaves the expression to Spark's rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

if TYPE_CHECKING:
    from pyspark.sql import types as T

_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)
# literals where Spark's grammar wants a number as written
_LITERAL_PLACES = (exp.TableSample, exp.Limit, exp.Offset, exp.Hint, exp.Interval, exp.DataType)
_SMALL_INTS = ("tinyint", "smallint", "int")


def seatunnel_numbers(tree: exp.Expression, types: "ExpressionTypes") -> exp.Expression:
    """``tree`` with SeaTunnel's literal types, arithmetic result types and epoch casts;
    ``types`` knows the input's fields."""
    for node in list(tree.find_all(exp.Literal)):
        if _is_decimal_literal(node) and not node.find_ancestor(*_LITERAL_PLACES):
            node.replace(_cast(node.copy(), "DOUBLE"))
    for node in reversed(list(tree.walk())):          # operands before what uses them
        if isinstance(node, _ARITHMETIC):
            new = _arithmetic(node, types)
        elif isinstance(node, exp.Cast):
            new = _epoch_cast(node, types)
        else:
            continue
        if new is not None:
            if node is tree:
                tree = new
            else:
                node.replace(new)
    return tree


def _is_decimal_literal(node: exp.Literal) -> bool:
    if node.is_string:
        return False
    text = node.this
    return "." in text and "e" not in text.lower()      # 1e3 is already a DOUBLE in Spark


def _cast(node: exp.Expression, to: str) -> exp.Expression:
    return exp.Cast(this=node, to=exp.DataType.build(to, dialect="spark"))


def _arithmetic(node: exp.Binary, types: "ExpressionTypes") -> exp.Expression | None:
    """The operation with SeaTunnel's result type, or None when Spark's is SeaTunnel's
    (or an operand's type is unknown)."""
    left, right = types.of(node.left), types.of(node.right)
    wanted = result_type(left, right)
    if wanted is None:
        return None
    name = wanted.simpleString()
    if isinstance(node, exp.Div) and name in ("int", "bigint"):
        quotient = exp.IntDiv(this=node.left.copy(), expression=node.right.copy())   # truncates, as Java's /
        return _cast(quotient, name) if name == "int" else quotient
    if name in ("int", "bigint") and not any(t.simpleString() in ("tinyint", "smallint") for t in (left, right)):
        return None                                       # Spark's own INT/BIGINT
    return _cast(node.copy(), name)


def result_type(left: "T.DataType | None", right: "T.DataType | None") -> "T.DataType | None":
    """The type SeaTunnel gives ``left op right`` (``op`` one of + - * / %), None if unknown."""
    from pyspark.sql import types as T

    if left is None or right is None:
        return None
    kinds = (left.simpleString(), right.simpleString())
    if all(k in _SMALL_INTS for k in kinds):
        return T.IntegerType()
    if all(k in (*_SMALL_INTS, "bigint") for k in kinds):
        return T.LongType()
    decimals = [t for t in (left, right) if isinstance(t, T.DecimalType)]
    if decimals:
        return T.DecimalType(max(t.precision for t in decimals), max(t.scale for t in decimals))
    if any(k in ("float", "double") for k in kinds):
        return T.DoubleType()
    return None


def _epoch_cast(node: exp.Cast, types: "ExpressionTypes") -> exp.Expression | None:
    """CAST of a BIGINT to TIMESTAMP (epoch ms), of an INT to DATE (yyyyMMdd) or TIME (HHmmss)."""
    source = types.of(node.this)
    if source is None:
        return None
    target, kind = node.to.this, source.simpleString()
    value = node.this.copy()
    if kind == "bigint" and target in (exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPNTZ,
                                       exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.DATETIME):
        # local wall time of the instant, as SeaTunnel's LocalDateTime.ofInstant(.., systemDefault)
        return _cast(exp.Anonymous(this="timestamp_millis", expressions=[value]), "TIMESTAMP_NTZ")
    if kind in _SMALL_INTS and target == exp.DataType.Type.DATE:
        return exp.Anonymous(this="make_date", expressions=_split_digits(value))
    if kind in _SMALL_INTS and target == exp.DataType.Type.TIME:
        return exp.Anonymous(this="make_time", expressions=_split_digits(value))
    return None


def _split_digits(value: exp.Expression) -> list[exp.Expression]:
    """20210408 -> [2021, 4, 8] (as Java's integer arithmetic splits it)."""
    def part(divisor: int, modulo: int | None) -> exp.Expression:
        high = exp.IntDiv(this=exp.Paren(this=value.copy()), expression=exp.Literal.number(divisor))
        return exp.Cast(this=exp.Mod(this=high, expression=exp.Literal.number(modulo)) if modulo else high,
                        to=exp.DataType.build("INT"))
    return [part(10000, None), part(100, 100), part(1, 100)]


class ExpressionTypes:
    """The Spark type of an expression, as far as the input's schema (``table`` is the name
    the query reads it by) and literals tell it; None when they do not."""

    def __init__(self, schema: "T.StructType", table: str | None):
        self.schema, self.table = schema, (table or "").lower()

    def of(self, node: exp.Expression) -> "T.DataType | None":
        from pyspark.sql import types as T

        if isinstance(node, exp.Paren):
            return self.of(node.this)
        if isinstance(node, exp.Neg):
            return self.of(node.this)
        if isinstance(node, exp.Literal):
            if node.is_string:
                return T.StringType()
            text = node.this
            if any(c in text for c in ".eE"):
                return T.DoubleType()
            return T.IntegerType() if -(1 << 31) <= int(text) < (1 << 31) else T.LongType()
        if isinstance(node, exp.Cast):
            return _spark_type(node.to)
        if isinstance(node, _ARITHMETIC):
            return result_type(self.of(node.left), self.of(node.right))
        if isinstance(node, exp.IntDiv):
            return T.LongType()
        if isinstance(node, exp.Column):
            return self._field([p.name for p in node.parts])
        if isinstance(node, exp.Bracket) and len(node.expressions) == 1:
            outer = self.of(node.this)
            if isinstance(outer, T.MapType):
                return outer.valueType
            if isinstance(outer, T.ArrayType):
                return outer.elementType
        return None

    def _field(self, names: list[str]) -> "T.DataType | None":
        from pyspark.sql import types as T

        if len(names) > 1 and names[0].lower() == self.table and not _child(self.schema, names[0]):
            names = names[1:]                  # fake.id: the input table's name, not a field
        current: T.DataType = self.schema
        for i, name in enumerate(names):
            if isinstance(current, T.MapType):
                return current.valueType if i == len(names) - 1 else None     # map.key: its value
            if not isinstance(current, T.StructType):
                return None
            current = _child(current, name)
            if current is None:
                return None
        return current


def _child(struct: "T.StructType", name: str) -> "T.DataType | None":
    wanted = name.lower()
    return next((f.dataType for f in struct.fields if f.name.lower() == wanted), None)


def _spark_type(to: exp.DataType) -> "T.DataType | None":
    from pyspark.sql import types as T

    kind = exp.DataType.Type
    simple = {kind.TINYINT: T.ByteType(), kind.SMALLINT: T.ShortType(), kind.INT: T.IntegerType(),
              kind.BIGINT: T.LongType(), kind.FLOAT: T.FloatType(), kind.DOUBLE: T.DoubleType(),
              kind.TEXT: T.StringType(), kind.VARCHAR: T.StringType(), kind.DATE: T.DateType()}
    if to.this in simple:
        return simple[to.this]
    if to.this == kind.DECIMAL:
        params = [int(p.name) for p in to.expressions]
        return T.DecimalType(*(params or [10, 0]))
    return None


__all__ = ["ExpressionTypes", "result_type", "seatunnel_numbers"]
