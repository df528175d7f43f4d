"""Sql: transform rows with a SeaTunnel SQL query, run by Spark SQL."""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING

from seatide.plugin.base import Transform, TransformContext
from seatide.plugin.options import REQUIRED, STRING, Option
from seatide.plugin.registry import register
from seatide.plugin.rowkind import INSERT_ONLY, ROW_KIND_COLUMN, RowKind
from seatide.transforms.fields import TransformInputError, column, describe_fields
from seatide.transforms.sql_functions import rewrite_calls
from seatide.transforms.sql_text import (SqlSyntaxError, TableRef, Token, add_row_kind_to_selects,
                                         normalize_literals, render, replace_tables, significant,
                                         table_refs, tokenize)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# Analyzed-plan operators after which an output row no longer stands for one input row.
_ROW_CHANGING = {"Aggregate", "Window", "Distinct", "Deduplicate", "DeduplicateWithinWatermark",
                 "Join", "Union", "Intersect", "Except", "Expand", "Pivot", "Unpivot"}


@register
class Sql(Transform):
    """Runs a SQL query over the input, as SeaTunnel's Sql transform does, on Spark SQL.

    The query reads the input by the name it is known by (``plugin_input``, e.g.
    ``select id, upper(name) as name from fake where id > 0``); with a single table in the
    query, that table is the input whatever it is called. SeaTunnel's functions whose
    names or meanings differ from Spark's are rewritten (see ``sql_functions``); string
    literals keep backslashes as written, and "double quotes" name fields, as in SeaTunnel.
    Everything else is Spark SQL, so joins, aggregates and window functions work too.

    Row kinds: a query that maps each input row to output rows (projection, filter,
    LATERAL VIEW) keeps each row's kind: ``SELECT *`` carries it as a hidden field and
    other select lists get it added. A query whose rows no longer stand for one input
    row (GROUP BY, DISTINCT, window, join, union) emits INSERT rows and does not see the
    row kind at all. A query that names ``__row_kind`` itself decides the kind.

    Isolation: the input is registered as a temporary view with a name unique to each
    ``apply`` (``__seatide_sql_<uuid>``), the query's FROM target is rewritten to that
    view (aliased by the name the query used, so ``fake.id`` still resolves), and the view
    is dropped once Spark has analyzed the query. Pipelines running at once in one
    SparkSession therefore never see each other's tables, whatever their names.
    """

    plugin_name = "Sql"
    options = (
        Option("query", STRING, REQUIRED,
               "the SQL query; its FROM names the input table (plugin_input)"),
    )

    def check(self) -> None:
        text = self.opts["query"].strip().rstrip(";").strip()
        if not text:
            raise self.invalid("query", "Sql: option 'query' is empty; write a query such as "
                                        "select * from my_input where id > 0")
        try:
            tokens = normalize_literals(tokenize(text))
            self._spark_query = rewrite_calls(tokens)
            spark_tokens = tokenize(self._spark_query)
        except SqlSyntaxError as exc:
            raise self.invalid("query", f"Sql: cannot read the query: {exc}") from None
        first = next((spark_tokens[i] for i in significant(spark_tokens)), None)
        if first is None or not (first.is_word("SELECT", "WITH") or first.text == "("):
            raise self.invalid("query", "Sql: option 'query' must be a SELECT query "
                                        f"(it starts with '{first.text if first else ''}')")
        refs, ctes = table_refs(spark_tokens)
        if not [r for r in refs if r.name.lower() not in ctes]:
            raise self.invalid("query", "Sql: the query reads no table; read the input with "
                                        "FROM <its plugin_input name>")
        self._names_row_kind = _mentions_row_kind(spark_tokens)
        self._aggregates = _top_level_aggregate(spark_tokens)

    def row_kinds(self, upstream):
        if self._aggregates and not self._names_row_kind:
            return INSERT_ONLY
        return upstream

    def apply(self, df: "DataFrame", ctx: TransformContext) -> "DataFrame":
        view = f"__seatide_sql_{uuid.uuid4().hex}"
        tokens = tokenize(self._spark_query)
        query = replace_tables(tokens, self._input_refs(tokens, ctx.input_name), view)
        df.createOrReplaceTempView(view)
        try:
            out = self._with_row_kinds(query, _Input(df, ctx.input_name, view))
        finally:
            df.sparkSession.catalog.dropTempView(view)
        return _row_kind_last(out)

    def _with_row_kinds(self, query: list[Token], source: "_Input") -> "DataFrame":
        """Analyze ``query`` so that its output carries the right row kind (see the class doc)."""
        out = source.analyze(render(query))
        changing = _row_changing(out)
        if ROW_KIND_COLUMN in out.columns and (self._names_row_kind or not changing):
            return out             # carried by SELECT *, or chosen by the query itself
        if changing:
            if not self._names_row_kind:   # hide the kind from DISTINCT *, GROUP BY ALL
                source.df.drop(ROW_KIND_COLUMN).createOrReplaceTempView(source.view)
                out = source.analyze(render(query))
            return out.withColumn(ROW_KIND_COLUMN, _insert_kind())
        return source.analyze(render(add_row_kind_to_selects(query)), carrying=True)

    def _input_refs(self, tokens: list[Token], input_name: str) -> list[TableRef]:
        refs, ctes = table_refs(tokens)
        external = [r for r in refs if r.name.lower() not in ctes]
        mine = [r for r in external if r.name.lower() == (input_name or "").lower()]
        if mine:
            return mine
        names = sorted({r.name for r in external})
        if len(names) == 1:
            return external        # one table and one input: they are the same thing
        read = ", ".join(names) if names else "no table"
        raise TransformInputError("query", f"Sql: the query must read its input with FROM "
                                  f"{input_name}; it reads {read}")


class _Input:
    """The input DataFrame as the query sees it: registered under a unique view name."""

    def __init__(self, df: "DataFrame", name: str, view: str):
        self.df, self.name, self.view = df, name, view

    def analyze(self, query: str, carrying: bool = False) -> "DataFrame":
        from pyspark.errors import PySparkException

        try:
            return self.df.sparkSession.sql(query)
        except PySparkException as exc:
            message = str(exc).strip().splitlines()[0].replace(self.view, self.name)
            if carrying:
                raise TransformInputError(
                    "query", f"Sql: cannot carry the row kind through this query ({message}); "
                    f"select {ROW_KIND_COLUMN} in each SELECT that reads the input, or put "
                    "FilterRowKind or RowKindExtractor before the Sql transform") from None
            raise TransformInputError(
                "query", f"Sql: the query does not run on its input: {message} (input "
                f"'{self.name}' has fields: {describe_fields(self.df)})") from None


def _row_kind_last(out: "DataFrame") -> "DataFrame":
    """Move the row kind last as a tinyint, by position (output names may repeat)."""
    names = out.columns
    kinds = [i for i, name in enumerate(names) if name == ROW_KIND_COLUMN]
    if len(kinds) != 1:
        raise TransformInputError(
            "query", f"Sql: the query's output has {len(kinds)} '{ROW_KIND_COLUMN}' fields; "
            f"select it once (output fields: {', '.join(names)})")
    temp = [f"_{i}" for i in range(len(names))]
    fields = [column(temp[i]).alias(name) for i, name in enumerate(names) if i != kinds[0]]
    kind = column(temp[kinds[0]]).cast("tinyint").alias(ROW_KIND_COLUMN)
    return out.toDF(*temp).select(*fields, kind)


def _insert_kind():
    from pyspark.sql import functions as F

    return F.lit(int(RowKind.INSERT)).cast("tinyint")


def _row_changing(df: "DataFrame") -> bool:
    """Whether Spark's analyzed plan has an operator that merges, splits or joins rows."""
    tree = df._jdf.queryExecution().analyzed().treeString()
    # a streaming plan marks each of its operators with "~"
    operators = {m.group(1) for m in re.finditer(r"^[\s:+\-|~]*([A-Za-z]\w*)", tree, re.MULTILINE)}
    return bool(operators & _ROW_CHANGING)


def _mentions_row_kind(tokens: list[Token]) -> bool:
    return any(t.kind in ("ident", "qid") and t.text.strip("`") == ROW_KIND_COLUMN for t in tokens)


def _top_level_aggregate(tokens: list[Token]) -> bool:
    """GROUP BY or SELECT DISTINCT in the outer query: its rows are all INSERT."""
    depth = 0
    sig = [tokens[i] for i in significant(tokens)]
    for pos, token in enumerate(sig):
        if token.kind == "op" and token.text in "()":
            depth += 1 if token.text == "(" else -1
        elif depth == 0 and pos + 1 < len(sig):
            nxt = sig[pos + 1]
            if (token.is_word("GROUP") and nxt.is_word("BY")) or \
                    (token.is_word("SELECT") and nxt.is_word("DISTINCT")):
                return True
    return False
