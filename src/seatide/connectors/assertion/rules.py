"""The Assert sink's ``rules`` block, validated into plain values before anything runs.

Layout (SeaTunnel's)::

    rules {
      row_rules = [{ rule_type = MAX_ROW, rule_value = 10 }, { rule_type = MIN_ROW, rule_value = 5 }]
      field_rules = [{
        field_name = age
        field_type = int
        field_value = [{ rule_type = NOT_NULL }, { rule_type = MAX, rule_value = 100 }, { equals_to = 23 }]
      }]
      catalog_table_rule {
        primary_key_rule { primary_key_name = pk, primary_key_columns = [id] }
        constraint_key_rule = [{ constraint_key_name = uk, constraint_key_type = UNIQUE_KEY,
          constraint_key_columns = [{ constraint_key_column_name = name, constraint_key_sort_type = ASC }] }]
        column_rule = [{ name = id, type = bigint, nullable = false, column_length = 0,
                         default_value = "0", comment = "key" }]
      }
    }

Every error names the exact place, e.g. ``rules.field_rules[1].field_value[0].rule_value``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from seatide.plugin.options import KeyCheck, OptionNotice, kind_of
from seatide.plugin.types import SchemaError, parse_type

VALUE_RULE_TYPES = ("NOT_NULL", "NULL", "MIN", "MAX", "MIN_LENGTH", "MAX_LENGTH")
ROW_RULE_TYPES = ("MIN_ROW", "MAX_ROW")
_NEEDS_VALUE = {"MIN", "MAX", "MIN_LENGTH", "MAX_LENGTH", "MIN_ROW", "MAX_ROW"}
_UNSUPPORTED_CATALOG = {
    "table_identifier_rule": "it is not part of SeaTunnel's documented Assert options; compare the "
                             "table name with a sink placeholder instead",
}
_CATALOG_KEYS = ("primary_key_rule", "constraint_key_rule", "column_rule")
CONSTRAINT_TYPES = ("INDEX_KEY", "UNIQUE_KEY", "KEY")
SORT_TYPES = ("ASC", "DESC")


class RuleError(ValueError):
    """A malformed rule; ``path`` is where it sits under the sink's options."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = path


@dataclass(frozen=True)
class ValueRule:
    path: str
    rule_type: str | None            # None: only equals_to, or nothing (equals_to = null)
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
    """A column_rule entry; the attributes after data_type are compared only when given."""

    path: str
    name: str
    data_type: Any
    given: tuple[str, ...] = ()      # which of nullable, column_length, default_value, comment
    nullable: bool = True
    length: int = 0
    default: Any = None
    comment: str | None = None


@dataclass(frozen=True)
class PrimaryKeyRule:
    path: str
    name: str | None                 # None: any name
    columns: tuple[str, ...]


@dataclass(frozen=True)
class ConstraintKeyRule:
    path: str
    name: str
    kind: str
    columns: tuple[tuple[str, str], ...]    # (column, ASC | DESC)


@dataclass(frozen=True)
class Rules:
    row_rules: tuple[RowRule, ...]
    field_rules: tuple[FieldRule, ...]
    column_rules: tuple[ColumnRule, ...] | None    # None: no catalog_table_rule.column_rule
    primary_key: PrimaryKeyRule | None = None
    constraint_keys: tuple[ConstraintKeyRule, ...] | None = None   # None: no constraint_key_rule

    # Several tables: each table's own rules (tables_configs, by table_path), and the tables that
    # must have rows by the end (table-names).
    tables: tuple[tuple[str, "Rules"], ...] = ()
    table_names: tuple[str, ...] = ()

    def for_table(self, name: str | None) -> "Rules | None":
        """The tables_configs entry of table ``name`` (database.schema.table, or a shorter path that
        ends it: ``table_path = "test.table1"`` matches ``test.table1`` and ``db.test.table1``)."""
        for path, rules in self.tables:
            if name and (name == path or name.endswith("." + path)):
                return rules
        return None

    @property
    def needs_catalog(self) -> bool:
        """Whether a rule compares what only the catalog knows (keys, column attributes)."""
        return (self.primary_key is not None or self.constraint_keys is not None
                or any(c.given for c in self.column_rules or ()))


def parse_rules(block: Any, path: str = "rules", check_keys: KeyCheck | None = None) -> Rules:
    """The rules of ``block``; keys nobody reads go to ``check_keys`` (warned about, or refused
    under strict mode: ``plugin.options.KeyCheck``), by default ignored as SeaTunnel does."""
    keys = check_keys or KeyCheck()
    block = _mapping(block, path)
    keys(block, ("row_rules", "field_rules", "catalog_table_rule", "tables_configs", "table-names"), path)
    tables = tuple(_table_rules(t, f"{path}.tables_configs[{i}]", keys)
                   for i, t in enumerate(_list(block.get("tables_configs", []), f"{path}.tables_configs")))
    names = tuple(str(n) for n in _list(block.get("table-names", []), f"{path}.table-names"))
    return _rules(block, path, keys, tables, names)


def _table_rules(raw: Any, path: str, keys: KeyCheck) -> tuple[str, Rules]:
    raw = _mapping(raw, path)
    if not isinstance(raw.get("table_path"), str) or not raw["table_path"]:
        raise RuleError(f"{path}.table_path", "missing: name the table these rules check, e.g. "
                        "table_path = \"test.table1\"")
    keys(raw, ("table_path", "row_rules", "field_rules", "catalog_table_rule"), path)
    return raw["table_path"], _rules({k: v for k, v in raw.items() if k != "table_path"}, path, keys, (), ())


def _rules(block: dict, path: str, keys: KeyCheck, tables: tuple, names: tuple) -> Rules:
    rows = tuple(_row_rule(r, f"{path}.row_rules[{i}]", keys)
                 for i, r in enumerate(_list(block.get("row_rules", []), f"{path}.row_rules")))
    fields = tuple(_field_rule(r, f"{path}.field_rules[{i}]", keys)
                   for i, r in enumerate(_list(block.get("field_rules", []), f"{path}.field_rules")))
    columns, key, constraints = None, None, None
    if "catalog_table_rule" in block:
        columns, key, constraints = _catalog_rule(block["catalog_table_rule"], f"{path}.catalog_table_rule", keys)
    return Rules(rows, fields, columns, key, constraints, tables, names)


def _row_rule(raw: Any, path: str, keys: KeyCheck) -> RowRule:
    raw = _mapping(raw, path)
    keys(raw, ("rule_type", "rule_value"), path)
    rule_type = _rule_type(raw, path, ROW_RULE_TYPES)
    if rule_type is None:
        raise RuleError(f"{path}.rule_type", "missing: a row rule needs rule_type MIN_ROW or MAX_ROW")
    return RowRule(path, rule_type, _rule_value(raw, path, rule_type))


def _field_rule(raw: Any, path: str, keys: KeyCheck) -> FieldRule:
    raw = _mapping(raw, path)
    keys(raw, ("field_name", "field_type", "field_value"), path)
    name = raw.get("field_name")
    if not isinstance(name, str) or not name:
        raise RuleError(f"{path}.field_name", "missing: name the field the rules check")
    field_type = None
    if raw.get("field_type") is not None:
        try:
            field_type = parse_type(raw["field_type"])
        except SchemaError as exc:
            raise RuleError(f"{path}.field_type", str(exc)) from None
    values = tuple(_value_rule(v, f"{path}.field_value[{i}]", keys)
                   for i, v in enumerate(_list(raw.get("field_value", []), f"{path}.field_value")))
    return FieldRule(path, name, field_type, values)


def _value_rule(raw: Any, path: str, keys: KeyCheck) -> ValueRule:
    raw = _mapping(raw, path)
    keys(raw, ("rule_type", "rule_value", "equals_to"), path)
    rule_type = _rule_type(raw, path, VALUE_RULE_TYPES)
    if "equals_to" in raw and raw["equals_to"] is None:
        # SeaTunnel reads a null as no value (HOCON's hasPath), so `equals_to = null` compares
        # nothing; its own jobs write it beside field_type = "null", which does the checking.
        keys.unknown.append(OptionNotice(f"{path}.equals_to", f"{path}.equals_to = null checks nothing, as in "
                                         "SeaTunnel; check for nulls with rule_type = NULL"))
        return ValueRule(path, rule_type, _rule_value(raw, path, rule_type) if rule_type else None, False, None)
    has_equals = "equals_to" in raw
    if rule_type is None and not has_equals:
        raise RuleError(path, "needs rule_type (" + ", ".join(VALUE_RULE_TYPES) + ") or equals_to")
    value = _rule_value(raw, path, rule_type) if rule_type else None
    return ValueRule(path, rule_type, value, has_equals, raw.get("equals_to"))


def _catalog_rule(raw: Any, path: str, keys: KeyCheck):
    raw = _mapping(raw, path)
    for key in raw:
        if key in _UNSUPPORTED_CATALOG:
            raise RuleError(f"{path}.{key}", f"not supported: {_UNSUPPORTED_CATALOG[key]}; remove it "
                            f"(supported: {', '.join(_CATALOG_KEYS)})")
    keys(raw, _CATALOG_KEYS, path)
    columns = None
    if "column_rule" in raw:
        columns = tuple(_column_rule(c, f"{path}.column_rule[{i}]", keys)
                        for i, c in enumerate(_list(raw["column_rule"], f"{path}.column_rule")))
    key = _primary_key_rule(raw["primary_key_rule"], f"{path}.primary_key_rule", keys) \
        if "primary_key_rule" in raw else None
    constraints = None
    if "constraint_key_rule" in raw:
        constraints = tuple(_constraint_rule(c, f"{path}.constraint_key_rule[{i}]", keys) for i, c in
                            enumerate(_list(raw["constraint_key_rule"], f"{path}.constraint_key_rule")))
    return columns, key, constraints


def _column_rule(raw: Any, where: str, keys: KeyCheck) -> ColumnRule:
    column = _mapping(raw, where)
    keys(column, ("name", "type", "nullable", "column_length", "default_value", "comment"), where)
    for key in ("name", "type"):
        if column.get(key) in (None, ""):
            raise RuleError(f"{where}.{key}", "missing: a column rule needs name and type")
    try:
        data_type = parse_type(column["type"])
    except SchemaError as exc:
        raise RuleError(f"{where}.type", str(exc)) from None
    nullable, length = column.get("nullable", True), column.get("column_length", 0)
    if not isinstance(nullable, bool):
        raise RuleError(f"{where}.nullable", f"must be true or false, got {nullable!r}")
    if isinstance(length, bool) or not isinstance(length, int) or length < 0:
        raise RuleError(f"{where}.column_length", f"must be a whole number >= 0, got {length!r}")
    comment = column.get("comment")
    given = tuple(k for k in ("nullable", "column_length", "default_value", "comment") if k in column)
    return ColumnRule(where, str(column["name"]), data_type, given, nullable, length,
                      column.get("default_value"), None if comment is None else str(comment))


def _primary_key_rule(raw: Any, path: str, keys: KeyCheck) -> PrimaryKeyRule:
    raw = _mapping(raw, path)
    keys(raw, ("primary_key_name", "primary_key_columns"), path)
    columns = raw.get("primary_key_columns")
    if not isinstance(columns, list) or not columns:
        raise RuleError(f"{path}.primary_key_columns", "missing: list the key's columns, e.g. [id]")
    name = raw.get("primary_key_name")
    return PrimaryKeyRule(path, None if name is None else str(name), tuple(str(c) for c in columns))


def _constraint_rule(raw: Any, path: str, keys: KeyCheck) -> ConstraintKeyRule:
    raw = _mapping(raw, path)
    keys(raw, ("constraint_key_name", "constraint_key_type", "constraint_key_columns"), path)
    if raw.get("constraint_key_name") in (None, ""):
        raise RuleError(f"{path}.constraint_key_name", "missing: name the constraint key")
    kind = str(raw.get("constraint_key_type", "KEY")).strip().upper()
    if kind not in CONSTRAINT_TYPES:
        raise RuleError(f"{path}.constraint_key_type", f"'{raw['constraint_key_type']}' is not one of "
                        f"{', '.join(CONSTRAINT_TYPES)}")
    columns = []
    raw_columns = raw.get("constraint_key_columns")
    if not isinstance(raw_columns, list) or not raw_columns:
        raise RuleError(f"{path}.constraint_key_columns", "missing: list the key's columns, e.g. "
                        "[{ constraint_key_column_name = id, constraint_key_sort_type = ASC }]")
    for j, column in enumerate(raw_columns):
        at = f"{path}.constraint_key_columns[{j}]"
        column = _mapping(column, at)
        keys(column, ("constraint_key_column_name", "constraint_key_sort_type"), at)
        if column.get("constraint_key_column_name") in (None, ""):
            raise RuleError(f"{at}.constraint_key_column_name", "missing: name the column")
        sort = str(column.get("constraint_key_sort_type", "ASC")).strip().upper()
        if sort not in SORT_TYPES:
            raise RuleError(f"{at}.constraint_key_sort_type", f"must be ASC or DESC, got "
                            f"'{column['constraint_key_sort_type']}'")
        columns.append((str(column["constraint_key_column_name"]), sort))
    return ConstraintKeyRule(path, str(raw["constraint_key_name"]), kind, tuple(columns))


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
        raise RuleError(path, f"must be an object {{ ... }}, got {kind_of(value)}")
    return value


def _list(value: Any, path: str) -> list:
    if not isinstance(value, list):
        raise RuleError(path, f"must be a list [ ... ], got {kind_of(value)}")
    return value

