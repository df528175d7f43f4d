"""Assert sink: fails the job when the rows it receives break SeaTunnel-style rules."""

from __future__ import annotations

from dataclasses import replace

from seatide.connectors.assertion.catalog import check_catalog
from seatide.connectors.assertion.checks import AssertionFailed, check_batch
from seatide.connectors.assertion.rules import RowRule, Rules, RuleError, parse_rules
from seatide.plugin.base import Batch, Sink, SinkContext
from seatide.plugin.options import OBJECT, REQUIRED, Option
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ALL_KINDS
from seatide.plugin.sink_protocol import SinkTargets, Target, TargetRows
from seatide.plugin.tables import TableRoute


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

    def open_targets(self, ctx: SinkContext | None, routes: list[TableRoute], multi: bool) -> SinkTargets:
        return AssertTargets(ctx, routes, multi, self.rules)


class AssertTargets(SinkTargets):
    """Each table is checked by its own rules (``table_rules``: a target per table); on several
    tables, the top-level row rules count every table's rows together, and ``table-names`` is
    checked at the end."""

    decided_in_store = False      # it checks rows and writes nothing
    keeps_rows = False

    def __init__(self, ctx: SinkContext | None, routes: list[TableRoute], multi: bool, rules: Rules):
        self.rules = rules
        super().__init__(ctx, routes, multi)
        for key in self.keys():       # the catalog rules: once per pipeline start, before any row
            self.target(key)

    def open_target(self, key: str, routes: list[TableRoute]) -> Target:
        rules = routes[0].sink.table_rules()
        check_catalog(routes[0].sink.catalog, rules)
        return AssertTarget(key, routes, rules)

    def check_batch(self, state: dict) -> None:
        if self.multi:
            _check_rows(self.rules, int(state.get("total_rows", 0)), ("MAX_ROW",))

    def end_of_data(self, state: dict) -> None:
        super().end_of_data(state)
        if not self.multi:
            return
        _check_rows(self.rules, int(state.get("total_rows", 0)), ("MIN_ROW", "MAX_ROW"))
        names = {r.key: r.name for r in self.routes}
        seen = {names.get(key, key) for key, table in self.previous_targets(state).items()
                if int(table.get("total_rows", 0))}
        missing = [n for n in self.rules.table_names if not any(s == n or s.endswith("." + n) for s in seen)]
        if missing:
            raise AssertionFailed(f"table-names: no rows of table {', '.join(missing)} reached the sink "
                                  f"(tables with rows: {', '.join(sorted(seen)) or 'none'})", "table-names")


class AssertTarget(Target):
    def __init__(self, key: str, routes: list[TableRoute], rules: Rules):
        super().__init__(key, routes)
        self.rules = rules

    def apply(self, rows: TargetRows, batch: Batch) -> dict:
        count = sum(check_batch(part.frame, self.rules) for part in rows.parts)
        total = int(batch.previous_state.get("total_rows", 0)) + count
        _check_rows(self.rules, total, ("MAX_ROW",))
        return {"rows": count, "total_rows": total}

    def end_of_data(self, state: dict) -> None:
        _check_rows(self.rules, int(state.get("total_rows", 0)), ("MIN_ROW", "MAX_ROW"))


def _check_rows(rules: Rules, total: int, kinds: tuple[str, ...]) -> None:
    for rule in rules.row_rules:
        if rule.rule_type in kinds and _breaks(rule, total):
            raise AssertionFailed(f"row rule {rule.rule_type} {_number(rule.rule_value)}: {total} rows",
                                  rule.rule_type)


def _breaks(rule: RowRule, total: int) -> bool:
    return total > rule.rule_value if rule.rule_type == "MAX_ROW" else total < rule.rule_value


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


__all__ = ["AssertSink", "AssertTarget", "AssertTargets"]
