"""Assert sink: fails the job when the rows it receives break SeaTunnel-style rules."""

from __future__ import annotations

from seatide.connectors.assertion.catalog import check_catalog
from seatide.connectors.assertion.checks import AssertionFailed, check_batch
from seatide.connectors.assertion.rules import RowRule, Rules, RuleError, parse_rules
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
    table the sink receives (``self.catalog``, see plan.catalog).
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
               "nullable, column_length, default_value, comment}] }"),
    )

    def check(self) -> None:
        try:
            self.rules = parse_rules(self.opts["rules"], check_keys=self.check_keys)
        except RuleError as exc:
            raise self.invalid(exc.path, f"option {exc}") from None

    def writer(self, ctx: SinkContext) -> SinkWriter:
        check_catalog(self.catalog, self.rules)     # once per pipeline start, before any row
        return AssertWriter(self.rules)


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
        for rule in self.rules.row_rules:
            if rule.rule_type in kinds and _breaks(rule, total):
                raise AssertionFailed(f"row rule {rule.rule_type} {_number(rule.rule_value)}: "
                                      f"{total} rows", rule.rule_type)


def _breaks(rule: RowRule, total: int) -> bool:
    return total > rule.rule_value if rule.rule_type == "MAX_ROW" else total < rule.rule_value


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
