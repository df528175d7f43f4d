"""The Assert sink's ``rules`` block, validated into plain values before anything runs.

Layout (SeaTunnel's)::

    rules {
      row_rules = [{ rule_type = MAX_ROW, rule_value = 10 }, { rule_type = MIN_ROW, rule_value = 5 }]
      field_rules = [{
        field_name = age
        field_type = int
        field_value = [{ rule_type = NOT_NULL }, { rule_type = MAX, rule_value = 100 }, { equals_to = 23 }]
      }]
      catalog_table_rule { column_rule = [{ name = id, type = bigint }] }
    }

Every error names the exact place, e.g. ``rules.field_rules[1].field_value[0].rule_value``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from seatide.plugin.types import SchemaError, parse_type

VALUE_RULE_TYPES = ("NOT_NULL", "NULL", "MIN", "MAX", "MIN_LENGTH", "MAX_LENGTH")
ROW_RULE_TYPES = ("MIN_ROW", "MAX_ROW")
_NEEDS_VALUE = {"MIN", "MAX", "MIN_LENGTH", "MAX_LENGTH", "MIN_ROW", "MAX_ROW"}
_UNSUPPORTED = {
    "table-names": "multi-table asserts are not supported: SeaTide's Assert checks one input table",
    "tables_configs": "multi-table asserts are not supported: SeaTide's Assert checks one input table",
}
_UNSUPPORTED_CATALOG = {
    "primary_key_rule": "SeaTide's rows carry no primary key",
    "constraint_key_rule": "SeaTide's rows carry no constraint keys",
    "table_identifier_rule": "SeaTide's rows carry no table identifier",
}


class RuleError(ValueError):
    """A malformed rule; ``path`` is where it sits under the sink's options."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = path


@dataclass(frozen=True)
class ValueRule:
    path: str
    rule_type: str | None            # None: only equals_to
    rule_value: float | None
    has_equals: bool
    equals_to: Any


@dataclass(frozen=True)
class FieldRule:
    path: str
    field_name: str
    field_type: Any                  # Spark DataType or None
    values: tuple[ValueRule, ...]


@dataclass(frozen=True)
class RowRule:
    path: str
    rule_type: str
    rule_value: float


@dataclass(frozen=True)
class ColumnRule:
    path: str
    name: str
    data_type: Any


@dataclass(frozen=True)
class Rules:
    row_rules: tuple[RowRule, ...]
    field_rules: tuple[FieldRule, ...]
    column_rules: tuple[ColumnRule, ...] | None    # None: no catalog_table_rule.column_rule


def parse_rules(block: Any, path: str = "rules") -> Rules:
    block = _mapping(block, path)
    for key in block:
        if key in _UNSUPPORTED:
            raise RuleError(f"{path}.{key}", _UNSUPPORTED[key])
        if key not in ("row_rules", "field_rules", "catalog_table_rule"):
            raise RuleError(f"{path}.{key}", "unknown key (known: row_rules, field_rules, catalog_table_rule)")
    rows = tuple(_row_rule(r, f"{path}.row_rules[{i}]")
                 for i, r in enumerate(_list(block.get("row_rules", []), f"{path}.row_rules")))
    fields = tuple(_field_rule(r, f"{path}.field_rules[{i}]")
                   for i, r in enumerate(_list(block.get("field_rules", []), f"{path}.field_rules")))
    columns = None
    if "catalog_table_rule" in block:
        columns = _catalog_rule(block["catalog_table_rule"], f"{path}.catalog_table_rule")
    return Rules(rows, fields, columns)


def _row_rule(raw: Any, path: str) -> RowRule:
    raw = _mapping(raw, path)
    _only(raw, path, ("rule_type", "rule_value"))
    rule_type = _rule_type(raw, path, ROW_RULE_TYPES)
    if rule_type is None:
        raise RuleError(f"{path}.rule_type", "missing: a row rule needs rule_type MIN_ROW or MAX_ROW")
    return RowRule(path, rule_type, _rule_value(raw, path, rule_type))


def _field_rule(raw: Any, path: str) -> FieldRule:
    raw = _mapping(raw, path)
    _only(raw, path, ("field_name", "field_type", "field_value"))
    name = raw.get("field_name")
    if not isinstance(name, str) or not name:
        raise RuleError(f"{path}.field_name", "missing: name the field the rules check")
    field_type = None
    if raw.get("field_type") is not None:
        try:
            field_type = parse_type(raw["field_type"])
        except SchemaError as exc:
            raise RuleError(f"{path}.field_type", str(exc)) from None
    values = tuple(_value_rule(v, f"{path}.field_value[{i}]")
                   for i, v in enumerate(_list(raw.get("field_value", []), f"{path}.field_value")))
    return FieldRule(path, name, field_type, values)


def _value_rule(raw: Any, path: str) -> ValueRule:
    raw = _mapping(raw, path)
    _only(raw, path, ("rule_type", "rule_value", "equals_to"))
    rule_type = _rule_type(raw, path, VALUE_RULE_TYPES)
    has_equals = "equals_to" in raw
    if rule_type is None and not has_equals:
        raise RuleError(path, "needs rule_type (" + ", ".join(VALUE_RULE_TYPES) + ") or equals_to")
    if has_equals and raw["equals_to"] is None:
        raise RuleError(f"{path}.equals_to", "cannot be null; check for nulls with rule_type = NULL")
    value = _rule_value(raw, path, rule_type) if rule_type else None
    return ValueRule(path, rule_type, value, has_equals, raw.get("equals_to"))


def _catalog_rule(raw: Any, path: str) -> tuple[ColumnRule, ...]:
    raw = _mapping(raw, path)
    for key in raw:
        if key in _UNSUPPORTED_CATALOG:
            raise RuleError(f"{path}.{key}", f"not supported: {_UNSUPPORTED_CATALOG[key]}; remove it "
                            "(column_rule is supported)")
        if key != "column_rule":
            raise RuleError(f"{path}.{key}", "unknown key (supported: column_rule)")
    columns = []
    for i, column in enumerate(_list(raw.get("column_rule", []), f"{path}.column_rule")):
        where = f"{path}.column_rule[{i}]"
        column = _mapping(column, where)
        _only(column, where, ("name", "type", "nullable", "column_length", "default_value", "comment"))
        for key in ("name", "type"):
            if column.get(key) in (None, ""):
                raise RuleError(f"{where}.{key}", "missing: a column rule needs name and type")
        try:
            columns.append(ColumnRule(where, str(column["name"]), parse_type(column["type"])))
        except SchemaError as exc:
            raise RuleError(f"{where}.type", str(exc)) from None
    return tuple(columns)


def _rule_type(raw: dict, path: str, allowed: tuple[str, ...]) -> str | None:
    if "rule_type" in raw and raw["rule_type"] is None and "NULL" in allowed:
        return "NULL"   # the HOCON reader takes an unquoted NULL for null
    if raw.get("rule_type") is None:
        return None
    text = str(raw["rule_type"]).strip().upper()
    if text not in allowed:
        other = ROW_RULE_TYPES if allowed is VALUE_RULE_TYPES else VALUE_RULE_TYPES
        hint = (" (it belongs in " + ("row_rules" if allowed is VALUE_RULE_TYPES else "field_value") + ")"
                if text in other else "")
        raise RuleError(f"{path}.rule_type", f"unknown rule type '{raw['rule_type']}'{hint}; "
                        f"expected one of {', '.join(allowed)}")
    return text


def _rule_value(raw: dict, path: str, rule_type: str) -> float | None:
    value = raw.get("rule_value")
    if value is None:
        if rule_type in _NEEDS_VALUE:
            raise RuleError(f"{path}.rule_value", f"missing: rule {rule_type} needs a number, "
                            f"e.g. {{ rule_type = {rule_type}, rule_value = 10 }}")
        return None
    try:
        if isinstance(value, bool):
            raise ValueError
        return float(value)
    except (TypeError, ValueError):
        raise RuleError(f"{path}.rule_value", f"must be a number, got {value!r}") from None


def _mapping(value: Any, path: str) -> dict:
    if not isinstance(value, dict):
        raise RuleError(path, f"must be an object {{ ... }}, got {type(value).__name__}")
    return value


def _list(value: Any, path: str) -> list:
    if not isinstance(value, list):
        raise RuleError(path, f"must be a list [ ... ], got {type(value).__name__}")
    return value


def _only(raw: dict, path: str, allowed: tuple[str, ...]) -> None:
    for key in raw:
        if key not in allowed:
            raise RuleError(f"{path}.{key}", f"unknown key (known: {', '.join(allowed)})")
