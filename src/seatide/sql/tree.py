"""What the Sql transform reads from and changes in a parsed query (a sqlglot tree).

* the tables the query reads, and their rewrite to the view that isolates one ``apply``;
* whether the query's rows still stand for one input row each (projection, filter,
  LATERAL VIEW) or merge, split across or join rows (GROUP BY, DISTINCT, aggregate and
  window functions, joins, set operations, PIVOT) - decided from the tree, before Spark;
* the row kind added to each SELECT that produces a relation, so it rides along.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.sql.spark_builtins import ROW_MERGING


@dataclass(frozen=True)
class TableRef:
    name: str            # as written, parts joined with '.'
    node: exp.Table


def cte_names(tree: exp.Expression) -> set[str]:
    return {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}


def input_tables(tree: exp.Expression) -> list[TableRef]:
    """Tables the query reads that its own WITH clause does not define."""
    ctes = cte_names(tree)
    refs = []
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            continue                      # a table-valued function call, not a table
        name = ".".join(part.name for part in table.parts)
        if name.lower() not in ctes:
            refs.append(TableRef(name, table))
    return refs


def point_tables_at(refs: list[TableRef], view: str) -> None:
    """Make each reference read ``view``, aliased by the name the query used for it."""
    for ref in refs:
        alias = ref.node.alias or ref.node.name
        ref.node.set("this", exp.to_identifier(view))
        ref.node.set("db", None)
        ref.node.set("catalog", None)
        ref.node.set("alias", exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))


def merges_rows(tree: exp.Expression) -> bool:
    """Whether an output row may stand for several input rows, or for none of them alone.

    Only the relations the rows flow through count: a subquery inside an expression
    (``WHERE id IN (SELECT max(id) ...)``) filters or computes a value per row, so its
    aggregate does not make the query's rows merged.
    """
    def expression_subquery(node: exp.Expression) -> bool:
        return isinstance(node, exp.Select) and not _is_relation(node)

    for node in tree.walk(prune=expression_subquery):
        if expression_subquery(node):
            continue
        if isinstance(node, (exp.Group, exp.Window, exp.Join, exp.SetOperation, exp.Pivot,
                             exp.AggFunc)):
            return True
        if isinstance(node, exp.Select) and node.args.get("distinct"):
            return True
        if isinstance(node, exp.Anonymous) and node.name.lower() in ROW_MERGING:
            return True
    return False


def names_row_kind(tree: exp.Expression) -> bool:
    return any(ident.name == ROW_KIND_COLUMN for ident in tree.find_all(exp.Identifier))


def add_hidden_to_selects(tree: exp.Expression, names: list[str]) -> exp.Expression:
    """A copy of ``tree`` whose relation SELECTs also select the hidden columns ``names``
    (the row kind, a change stream's row sequence).

    A relation SELECT is the query itself, a branch of it, a CTE body or a subquery in
    FROM/JOIN; SELECTs inside expressions (``IN (SELECT ...)``) keep their one column. A
    SELECT with ``*`` already carries them (they are fields of the input).
    """
    tree = tree.copy()
    for select in list(tree.find_all(exp.Select)):
        if _is_relation(select) and not _selects_star(select):
            select.set("expressions", [*[exp.column(name, quoted=True) for name in names],
                                       *select.expressions])
    return tree


def _is_relation(select: exp.Select) -> bool:
    node: exp.Expression = select
    while node.parent is not None:
        parent = node.parent
        if isinstance(parent, exp.Select):
            if not isinstance(node, (exp.From, exp.Join, exp.With)):
                return False
        elif not isinstance(parent, (exp.Subquery, exp.CTE, exp.With, exp.SetOperation,
                                     exp.From, exp.Join)):
            return False
        node = parent
    return True


def _selects_star(select: exp.Select) -> bool:
    return any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star)
               for e in select.expressions)
