"""catalog_table_rule against the catalog of the table the sink receives (plan.catalog).

Checked once, before any row, as SeaTunnel does: primary_key_rule, constraint_key_rule and
the column attributes of column_rule (nullable, column_length, default_value, comment) that
a rule gives. Column names and types are checked against each batch's schema (checks.py).
"""

from __future__ import annotations

from typing import Any

from seatide.connectors.assertion.checks import AssertionFailed
from seatide.connectors.assertion.rules import Rules
from seatide.plugin.schema import Schema


def check_catalog(catalog: Schema | None, rules: Rules) -> None:
    """Raise AssertionFailed naming the first catalog rule that does not hold."""
    if not rules.needs_catalog:
        return
    if catalog is None:
        rule = ("primary_key_rule" if rules.primary_key else
                "constraint_key_rule" if rules.constraint_keys is not None else "column_rule")
        raise AssertionFailed(f"catalog_table_rule {rule}: the input has no table metadata to compare "
                              "with (its source declares no schema { ... }, or the sink reads several "
                              "inputs)", rule)
    if rules.primary_key is not None:
        _check_primary_key(catalog, rules)
    if rules.constraint_keys is not None:
        _check_constraints(catalog, rules)
    _check_column_attributes(catalog, rules)


def _check_primary_key(catalog: Schema, rules: Rules) -> None:
    rule, actual = rules.primary_key, catalog.primary_key
    if actual is None:
        raise AssertionFailed(f"catalog_table_rule primary_key_rule: expected primary key "
                              f"{_key(rule.name, rule.columns)}, the table has none", "primary_key_rule")
    if (rule.name is not None and rule.name != actual.name) or rule.columns != actual.columns:
        raise AssertionFailed(f"catalog_table_rule primary_key_rule: expected primary key "
                              f"{_key(rule.name, rule.columns)}, the table's is "
                              f"{_key(actual.name, actual.columns)}", "primary_key_rule")


def _key(name: str | None, columns: tuple[str, ...]) -> str:
    return (f"'{name}' " if name is not None else "") + "(" + ", ".join(columns) + ")"


def _check_constraints(catalog: Schema, rules: Rules) -> None:
    expected = {(k.name, k.kind, k.columns) for k in rules.constraint_keys}
    actual = {(k.name, k.kind, k.columns) for k in catalog.constraint_keys}
    problems = [f"missing {_constraint(k)}" for k in sorted(expected - actual)]
    problems += [f"unexpected {_constraint(k)}" for k in sorted(actual - expected)]
    if problems:
        raise AssertionFailed("catalog_table_rule constraint_key_rule: " + "; ".join(problems),
                              "constraint_key_rule")


def _constraint(key: tuple) -> str:
    name, kind, columns = key
    return f"{kind} '{name}' (" + ", ".join(f"{c} {s}" for c, s in columns) + ")"


def _check_column_attributes(catalog: Schema, rules: Rules) -> None:
    by_name = {c.name: c for c in catalog.columns}
    problems = []
    for rule in rules.column_rules or ():
        if not rule.given:
            continue
        column = by_name.get(rule.name)
        if column is None:
            problems.append(f"'{rule.name}' has no declared column to compare "
                            f"{', '.join(rule.given)} with")
            continue
        pairs: list[tuple[str, Any, Any]] = [
            ("nullable", rule.nullable, column.nullable), ("column_length", rule.length, column.length),
            ("default_value", _text(rule.default), _text(column.default)),
            ("comment", rule.comment, column.comment)]
        problems += [f"'{rule.name}' {key} is {_shown(got)}, expected {_shown(want)}"
                     for key, want, got in pairs if key in rule.given and want != got]
    if problems:
        raise AssertionFailed("catalog_table_rule column_rule: " + "; ".join(problems), "column_rule")


def _text(value: Any) -> str | None:
    # default_value is a string in SeaTunnel's rule; a declared default may be a number.
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    return f"'{value}'" if isinstance(value, str) else str(value)
