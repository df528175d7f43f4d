"""Assert sink: fails the job when the rows it receives break SeaTunnel-style rules."""

from __future__ import annotations

from dataclasses import replace

from seatide.connectors.assertion.catalog import check_catalog
from seatide.connectors.assertion.checks import AssertionFailed, check_batch
from seatide.connectors.assertion.rules import RowRule, Rules, RuleError, parse_rules
from seatide.connectors.table_writers import TableWriters
from seatide.plugin.base import Batch, Sink, SinkContext, SinkWriter
from seatide.plugin.options import OBJECT, REQUIRED, Option
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ALL_KINDS


@register
class AssertSink(Sink):
    """Checks every row against ``rules`` and fails the job on the first rule that breaks.

    Field rules (NOT_NULL, NULL, MIN, MAX, MIN_LENGTH, MAX_LENGTH, equals_to, field_type)
    are checked per micro-batch in one Spark aggregation. The running row count is
    committed with each batch, so MAX_ROW fails as soon as it is exceeded and MIN_ROW is
    checked when a bounded job has written everything — both stay right across restarts.
    A STREAMING job never ends, so its MIN_ROW rules are never checked. Rows of every kind
    count, as in SeaTunnel. ``catalog_table_rule`` compares column_rule's names and types
    with each batch, and primary_key_rule, constraint_key_rule and column_rule's nullable,
    column_length, default_value and comment once, before any row, with the catalog of the
    table the sink receives (``self.catalog``, see plan.catalog). On several tables,
    ``tables_configs`` gives each table (by ``table_path``) rules of its own, checked on its rows
    alone; the top-level rules hold for every table (row rules count all their rows together), and
    ``table-names`` lists tables that must have rows by the end.
    """

    plugin_name = "Assert"
    accepted_row_kinds = ALL_KINDS
    options = (
        Option("rules", OBJECT, REQUIRED,
               "row_rules = [{rule_type = MIN_ROW|MAX_ROW, rule_value = n}], field_rules = "
               "[{field_name, field_type, field_value = [{rule_type, rule_value, equals_to}]}], "
               "catalog_table_rule { primary_key_rule { primary_key_name, primary_key_columns }, "
               "constraint_key_rule = [{constraint_key_name, constraint_key_type, constraint_key_columns = "
               "[{constraint_key_column_name, constraint_key_sort_type}]}], column_rule = [{name, type, "
               "nullable, column_length, default_value, comment}] }; several tables: tables_configs = "
               "[{table_path, row_rules, field_rules, catalog_table_rule}], table-names = [...]"),
    )

    def check(self) -> None:
        try:
            self.rules = parse_rules(self.opts["rules"], check_keys=self.check_keys)
        except RuleError as exc:
            raise self.invalid(exc.path, f"option {exc}") from None

    def table_rules(self) -> Rules:
        """The rules this sink checks its input with. One input table: the rules and its own
        tables_configs entry, if any. One table of a multi-table input (``table_name``): every
        field rule and the table's entry, whose row rules count this table's rows alone (the
        top-level row rules count every table's rows: ``AssertTables``)."""
        rules = self.rules
        name = self.table_name or (self.catalog.table if self.catalog is not None else None)
        own = rules.for_table(name)
        rows = () if self.table_name else rules.row_rules
        if own is None:
            return replace(rules, row_rules=rows, tables=())
        catalog = own if own.needs_catalog or own.column_rules is not None else rules
        return replace(own, row_rules=rows + own.row_rules, field_rules=rules.field_rules + own.field_rules,
                       column_rules=catalog.column_rules, primary_key=catalog.primary_key,
                       constraint_keys=catalog.constraint_keys)

    def writer(self, ctx: SinkContext) -> SinkWriter:
        rules = self.table_rules()
        check_catalog(self.catalog, rules)     # once per pipeline start, before any row
        return AssertWriter(rules)

    def table_writer(self, ctx: SinkContext, routes) -> SinkWriter:
        return AssertTables(ctx, routes, self.rules)


class AssertWriter(SinkWriter):
    def __init__(self, rules: Rules):
        self.rules = rules

    def write_batch(self, df, batch: Batch) -> dict:
        rows = check_batch(df, self.rules)
        total = int(batch.previous_state.get("total_rows", 0)) + rows
        self._check_rows(total, ("MAX_ROW",))
        return {"rows": rows, "total_rows": total}

    def end_of_data(self, state: dict) -> None:
        self._check_rows(int(state.get("total_rows", 0)), ("MIN_ROW", "MAX_ROW"))

    def _check_rows(self, total: int, kinds: tuple[str, ...]) -> None:
        _check_rows(self.rules, total, kinds)


class AssertTables(TableWriters):
    """Assert over several tables: each table checked by its own writer (``table_rules``), the
    top-level row rules against every table's rows together, and ``table-names`` at the end."""

    def __init__(self, ctx: SinkContext, routes, rules: Rules):
        super().__init__(ctx, routes)
        self.rules = rules

    def write_batch(self, frames, batch: Batch) -> dict:
        state = super().write_batch(frames, batch)
        state["total_rows"] = int(batch.previous_state.get("total_rows", 0)) + state["rows"]
        _check_rows(self.rules, state["total_rows"], ("MAX_ROW",))
        return state

    def end_of_data(self, state: dict) -> None:
        super().end_of_data(state)
        _check_rows(self.rules, int(state.get("total_rows", 0)), ("MIN_ROW", "MAX_ROW"))
        seen = {name for name, table in state.get("tables", {}).items() if int(table.get("total_rows", 0))}
        missing = [n for n in self.rules.table_names if not any(s == n or s.endswith("." + n) for s in seen)]
        if missing:
            raise AssertionFailed(f"table-names: no rows of table {', '.join(missing)} reached the sink "
                                  f"(tables with rows: {', '.join(sorted(seen)) or 'none'})", "table-names")


def _check_rows(rules: Rules, total: int, kinds: tuple[str, ...]) -> None:
    for rule in rules.row_rules:
        if rule.rule_type in kinds and _breaks(rule, total):
            raise AssertionFailed(f"row rule {rule.rule_type} {_number(rule.rule_value)}: {total} rows",
                                  rule.rule_type)


def _breaks(rule: RowRule, total: int) -> bool:
    return total > rule.rule_value if rule.rule_type == "MAX_ROW" else total < rule.rule_value


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
