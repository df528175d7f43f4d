"""Checking one batch against the Assert rules with a single Spark aggregation.

Schema-level rules (a field exists, ``catalog_table_rule.column_rule``) are checked against
the DataFrame's schema without touching data. ``field_type`` holds when the field has that
type, or else when every value is NULL (SeaTunnel checks each value's type, and NULL has
every type). Every value rule becomes two
aggregates over the batch — how many rows break it, and one such row's value — and all of
them, plus the row count, are computed in one pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from seatide.connectors.assertion.rules import FieldRule, Rules, ValueRule
from seatide.connectors.console import format_value
from seatide.plugin.base import PermanentError
from seatide.plugin.rowkind import user_columns
from seatide.plugin.types import same_type, type_name


class AssertionFailed(PermanentError):
    """A rule of an Assert sink does not hold; ``str()`` names the rule, field and a value.

    Permanent: the runtime fails the job with this message instead of retrying it."""

    def __init__(self, message: str, rule: str = "", field: str | None = None):
        super().__init__(f"Assert failed: {message}")
        self.rule = rule
        self.field = field


@dataclass(frozen=True)
class _Check:
    field: str
    label: str          # "MAX 100", "equals_to 23"
    fail: Any           # Column: true for a row that breaks the rule
    shown: Any          # Column: what to show of such a row
    length: bool        # the shown value is (value, length)


def _col(name: str):
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def check_schema(schema, rules: Rules) -> None:
    """Rules that only need the batch's schema; raises AssertionFailed."""
    columns = {f.name: f.dataType for f in schema.fields if f.name in user_columns(schema.names)}
    for rule in rules.field_rules:
        if rule.field_name not in columns:
            raise AssertionFailed(f"field '{rule.field_name}' ({rule.path}.field_name) is not in the "
                                  f"input (fields: {', '.join(columns)})", "field_name", rule.field_name)
    if rules.column_rules is not None:
        _check_columns(columns, rules)


def _same_type(actual, expected) -> bool:
    # As SeaTunnel: by field names and types, ignoring Spark's nullability flags; a decimal
    # of the declared scale that fits the declared precision passes.
    return same_type(actual, expected)


def _check_columns(columns: dict, rules: Rules) -> None:
    expected = {c.name: c.data_type for c in rules.column_rules}
    problems = [f"missing '{n}'" for n in expected if n not in columns]
    problems += [f"unexpected '{n}'" for n in columns if n not in expected]
    problems += [f"'{n}' is {type_name(columns[n])}, expected {type_name(t)}"
                 for n, t in expected.items() if n in columns and not _same_type(columns[n], t)]
    if problems:
        raise AssertionFailed("catalog_table_rule column_rule: " + "; ".join(problems), "column_rule")


def _checks(df, rules: Rules) -> list[_Check]:
    types = {f.name: f.dataType for f in df.schema.fields}
    checks = []
    for rule in rules.field_rules:
        actual = types[rule.field_name]
        if rule.field_type is not None and not _same_type(actual, rule.field_type):
            # As SeaTunnel checks each value's type: NULL passes any field_type (a map's missing
            # key is NULL, and its rule may say field_type = null), any other value breaks it.
            column = _col(rule.field_name)
            checks.append(_Check(rule.field_name, f"field_type {type_name(rule.field_type)} (the field is "
                                 f"{type_name(actual)})", column.isNotNull(), column, False))
        for value_rule in rule.values:
            checks.extend(_value_checks(rule, value_rule, types[rule.field_name]))
    return checks


def _value_checks(rule: FieldRule, value_rule: ValueRule, data_type) -> list[_Check]:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    column, name, kind = _col(rule.field_name), rule.field_name, value_rule.rule_type
    checks = []
    if kind in ("MIN", "MAX"):
        if not isinstance(data_type, T.NumericType):
            raise AssertionFailed(f"field '{name}' rule {kind} needs a numeric field; its type is "
                                  f"{type_name(data_type)} (use MIN_LENGTH/MAX_LENGTH or equals_to)", kind, name)
        beyond = column < value_rule.rule_value if kind == "MIN" else column > value_rule.rule_value
        checks.append(_Check(name, f"{kind} {_number(value_rule.rule_value)}", column.isNull() | beyond,
                             column, False))
    elif kind in ("MIN_LENGTH", "MAX_LENGTH"):
        length = _length(column, data_type)
        beyond = length < value_rule.rule_value if kind == "MIN_LENGTH" else length > value_rule.rule_value
        checks.append(_Check(name, f"{kind} {_number(value_rule.rule_value)}", beyond,
                             F.struct(column.alias("v"), length.alias("n")), True))
    elif kind in ("NOT_NULL", "NULL"):
        checks.append(_Check(name, kind, column.isNull() if kind == "NOT_NULL" else column.isNotNull(),
                             column, False))
    if value_rule.has_equals:
        expected = expected_value(value_rule.equals_to, data_type)
        same = _comparable(column, data_type).eqNullSafe(_comparable(expected, data_type))
        checks.append(_Check(name, f"equals_to {format_value(value_rule.equals_to)}",
                             column.isNotNull() & ~same, column, False))
    return checks


def _length(column, data_type):
    """SeaTunnel's length: of the value as a string, a null counting as empty."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(data_type, (T.ArrayType, T.MapType)):
        return F.coalesce(F.size(column), F.lit(0))
    text = column if isinstance(data_type, (T.StringType, T.BinaryType)) else column.cast("string")
    return F.coalesce(F.length(text), F.lit(0))


def _comparable(column, data_type):
    """``column`` in a form Spark can compare: Spark cannot compare maps, at any depth; a map's
    entries, sorted, compare the same way SeaTunnel compares maps (as sets of entries)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if not _holds_map(data_type):
        return column
    if isinstance(data_type, T.MapType):
        values = column if not _holds_map(data_type.valueType) else \
            F.transform_values(column, lambda _, v: _comparable(v, data_type.valueType))
        return F.array_sort(F.map_entries(values))
    if isinstance(data_type, T.ArrayType):
        return F.transform(column, lambda item: _comparable(item, data_type.elementType))
    return F.when(column.isNotNull(), F.struct(*[_comparable(column[f.name], f.dataType).alias(f.name)
                                                 for f in data_type.fields]))


def _holds_map(data_type) -> bool:
    from pyspark.sql import types as T

    if isinstance(data_type, T.MapType):
        return True
    if isinstance(data_type, T.ArrayType):
        return _holds_map(data_type.elementType)
    return isinstance(data_type, T.StructType) and any(_holds_map(f.dataType) for f in data_type.fields)


def expected_value(value: Any, data_type):
    """``equals_to`` as a Spark value of the field's type, built from the rule's values one by one
    (rows may be written as lists or objects; a map's keys are of any type, as HOCON writes them:
    ``{ "2024-01-26" = v0 }`` for a ``map<date, string>``)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if value is None:
        return F.lit(None).cast(data_type)
    if isinstance(data_type, T.StructType) and isinstance(value, (list, dict)):
        items = value if isinstance(value, list) else [value.get(f.name) for f in data_type.fields]
        items = list(items) + [None] * (len(data_type.fields) - len(items))
        return F.struct(*[expected_value(v, f.dataType).alias(f.name) for f, v in zip(data_type.fields, items)])
    # Each item is of its type already; only an empty one needs a cast (Spark 4.3 refuses to
    # cast an ARRAY<TIME> even to itself)
    if isinstance(data_type, T.ArrayType) and isinstance(value, list):
        items = F.array(*[expected_value(v, data_type.elementType) for v in value])
        return items if value else items.cast(data_type)
    if isinstance(data_type, T.MapType) and isinstance(value, dict):
        entries = [part for k, v in value.items()
                   for part in (expected_value(k, data_type.keyType), expected_value(v, data_type.valueType))]
        return F.create_map(*entries) if entries else F.create_map().cast(data_type)
    if isinstance(data_type, T.BinaryType):
        return F.unbase64(F.lit(str(value)))
    if isinstance(data_type, T.BooleanType) and isinstance(value, bool):
        return F.lit(value)
    return F.lit(str(value) if not isinstance(value, (int, float)) or isinstance(data_type, T.DecimalType)
                 else value).cast(data_type)


def check_batch(df, rules: Rules) -> int:
    """Check every value rule over ``df`` in one pass; return its row count."""
    from pyspark.sql import functions as F

    check_schema(df.schema, rules)
    checks = _checks(df, rules)
    aggregates = [F.count(F.lit(1)).alias("rows")]
    for i, check in enumerate(checks):
        aggregates.append(F.count_if(check.fail).alias(f"c{i}"))
        sample = F.when(check.fail, F.struct(check.shown.alias("v")))
        aggregates.append(F.first(sample, ignorenulls=True).alias(f"s{i}"))
    result = df.agg(*aggregates).collect()[0]
    for i, check in enumerate(checks):
        failing = result[f"c{i}"]
        if failing:
            raise AssertionFailed(_failure(check, result[f"s{i}"]["v"], failing, result["rows"]),
                                  check.label.split(" ")[0], check.field)
    return int(result["rows"])


def _failure(check: _Check, sample: Any, failing: int, rows: int) -> str:
    if check.length:
        shown = f"{format_value(sample['v'])} (length {sample['n']})"
    else:
        shown = format_value(sample)
    return (f"field '{check.field}' rule {check.label}: value {shown} "
            f"({failing} of {rows} rows in the batch break it)")
