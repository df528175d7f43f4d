"""Sql: transform rows with a SeaTunnel SQL query, run by Spark SQL."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from seatide.plugin.base import Transform, TransformContext
from seatide.plugin.options import LIST, REQUIRED, STRING, Option
from seatide.plugin.registry import register
from seatide.plugin.rowkind import HIDDEN_COLUMNS, INSERT_ONLY, ROW_KIND_COLUMN, ROW_SEQ_COLUMN, RowKind
from seatide.transforms.fields import TransformInputError, column, describe_fields

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from sqlglot import exp


@register
class Sql(Transform):
    """Runs a SQL query over the input, as SeaTunnel's Sql transform does, on Spark SQL.

    The query reads the input by the name it is known by (``plugin_input``, e.g.
    ``select id, upper(name) as name from fake where id > 0``); with a single table in the
    query, that table is the input whatever it is called. The query is read with
    SeaTunnel's lexical rules (``seatide.sql.dialect``) and its calls get SeaTunnel's meaning
    (``seatide.sql.functions``); the rest is Spark SQL, so joins, aggregates and window functions
    work too. Python functions named in ``udfs`` (or the env's ``sql.udfs``, for every Sql
transform of the job) become SQL functions (``seatide.sql.udf``).
    Reading and translating happen once, in ``check`` (validation, before Spark starts)
    and ``apply`` (once per pipeline start); jobs without a Sql transform never load sqlglot.

    Row kinds: a query that maps each input row to output rows (projection, filter,
    LATERAL VIEW) keeps each row's kind: ``SELECT *`` carries it as a hidden field and
    other select lists get it added. A query whose rows no longer stand for one input
    row (GROUP BY, DISTINCT, aggregate or window function, join, set operation) emits
    INSERT rows and does not see the row kind at all. A query that names ``__row_kind``
    itself decides the kind. Which case applies is read from the query's tree.

    Isolation: the input is registered as a temporary view with a name unique to each
    ``apply`` (``__seatide_sql_<uuid>``), the query's tables are pointed at that view
    (aliased by the name the query used, so ``fake.id`` still resolves), UDFs are
    registered under names unique to the ``apply`` too, and both are dropped once Spark
    has analyzed the query. Pipelines running at once in
    one SparkSession therefore never see each other's tables or functions.
    """

    plugin_name = "Sql"
    options = (
        Option("query", STRING, REQUIRED,
               "the SQL query; its FROM names the input table (plugin_input)"),
        Option("udfs", LIST, [],
               "Python functions usable as SQL functions: \"module:function\", "
               "\"path/file.py:function\", or { function, name, returns } (see docs/sql.md)"),
    )

    def check(self) -> None:
        from seatide.sql.dialect import SqlSyntaxError, parse_query
        from seatide.sql.translate import translate_calls
        from seatide.sql.tree import input_tables, merges_rows, names_row_kind
        from seatide.sql.udf import UdfError, check_types, load_udfs

        text = self.opts["query"].strip().rstrip(";").strip()
        if not text:
            raise self.invalid("query", "Sql: option 'query' is empty; write a query such as "
                                        "select * from my_input where id > 0")
        try:
            own = load_udfs(self.opts["udfs"], self.check_keys)
            check_types(own)
        except UdfError as exc:
            raise self.invalid("udfs", f"Sql: {exc}") from None
        # env's sql.udfs were checked when the env was read; the transform's own win a clash
        job_wide = load_udfs(list(self.env.sql_udfs)) if self.env and self.env.sql_udfs else {}
        self._udfs = {**job_wide, **own}
        try:
            tree = parse_query(text)
            if not isinstance(tree, _query_types()):
                raise self.invalid("query", "Sql: option 'query' must be a SELECT query "
                                            f"(it starts with '{text.split()[0]}')")
            self._parsed = tree.copy()       # translated again in apply, knowing the input's types
            self._tree = translate_calls(tree, self._udf_names("check"))
        except SqlSyntaxError as exc:
            raise self.invalid("query", f"Sql: cannot read the query: {exc}") from None
        if not input_tables(self._tree):
            raise self.invalid("query", "Sql: the query reads no table; read the input with "
                                        "FROM <its plugin_input name>")
        self._names_row_kind = names_row_kind(self._tree)
        self._merges = merges_rows(self._tree)

    def _udf_names(self, suffix: str) -> dict[str, str]:
        """SQL name -> the name Spark knows the UDF by while this query is analyzed."""
        return {name: f"__seatide_udf_{name.lower()}_{suffix}" for name in self._udfs}

    def row_kinds(self, upstream):
        if self._merges and not self._names_row_kind:
            return INSERT_ONLY
        return upstream

    def per_table_refusal(self) -> str | None:
        if self._merges:
            return ("this query merges rows (GROUP BY, DISTINCT, an aggregate or window function, a join or a "
                    "set operation): its result over one micro-batch of a table is not its result over the "
                    "table. SeaTunnel's Sql transform does not join or aggregate either; write the query per "
                    "row (select, where), or read the table with a single-table source")
        return None

    def catalog(self, upstream):
        from seatide.plan.catalog import shape_unknown

        # The output fields are known only once Spark analyses the code: keep the table name only.
        return shape_unknown(upstream)

    def apply(self, df: "DataFrame", ctx: TransformContext) -> "DataFrame":
        from seatide.sql.arithmetic import ExpressionTypes, seatunnel_numbers
        from seatide.sql.python_calls import register_python_functions
        from seatide.sql.translate import translate_calls
        from seatide.sql.tree import point_tables_at

        unique = uuid.uuid4().hex
        view = f"__seatide_sql_{unique}"
        udf_names = self._udf_names(unique)
        types = ExpressionTypes(df.schema, ctx.input_name)
        tree = seatunnel_numbers(self._parsed.copy(), types)
        tree = translate_calls(tree, udf_names, types.of)
        point_tables_at(self._input_refs(tree, ctx.input_name), view)
        df.createOrReplaceTempView(view)
        for name, udf in self._udfs.items():
            df.sparkSession.udf.register(udf_names[name], udf.spark_function())
        register_python_functions(df.sparkSession, tree)     # DES, CHINESE_TO_NUM: never dropped
        try:
            out = self._with_row_kinds(tree, _Input(df, ctx.input_name, view))
        finally:
            df.sparkSession.catalog.dropTempView(view)
            for registered in udf_names.values():
                df.sparkSession.sql(f"DROP TEMPORARY FUNCTION IF EXISTS {registered}")
        return _hidden_last(out)

    def _with_row_kinds(self, tree: "exp.Expression", source: "_Input") -> "DataFrame":
        """Analyze the query so that its output carries the right row kind (see the class doc)."""
        from seatide.sql.dialect import to_spark
        from seatide.sql.tree import add_hidden_to_selects

        if self._merges:
            # A merged row stands for no one source change, so it has no place in the source's
            # order; hide the kind too from DISTINCT *, GROUP BY ALL unless the query names it.
            hide = [ROW_SEQ_COLUMN] if self._names_row_kind else list(HIDDEN_COLUMNS)
            source.df.drop(*hide).createOrReplaceTempView(source.view)
            out = source.analyze(to_spark(tree))
            if ROW_KIND_COLUMN in out.columns and self._names_row_kind:
                return out
            return out.withColumn(ROW_KIND_COLUMN, _insert_kind())
        out = source.analyze(to_spark(tree))
        # carried by SELECT *, or the kind chosen by the query itself; the rest is added
        missing = [name for name in HIDDEN_COLUMNS if name in source.df.columns and name not in out.columns]
        if not missing:
            return out
        return source.analyze(to_spark(add_hidden_to_selects(tree, missing)), carrying=True)

    def _input_refs(self, tree: "exp.Expression", input_name: str):
        from seatide.sql.tree import input_tables

        external = input_tables(tree)
        mine = [r for r in external if r.name.lower() == (input_name or "").lower()]
        if mine:
            return mine
        names = sorted({r.name for r in external})
        if len(names) == 1:
            return external        # one table and one input: they are the same thing
        read = ", ".join(names) if names else "no table"
        raise TransformInputError("query", f"Sql: the query must read its input with FROM "
                                  f"{input_name}; it reads {read}")


def _query_types() -> tuple:
    from sqlglot import exp

    return (exp.Select, exp.SetOperation, exp.Subquery)


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


def _hidden_last(out: "DataFrame") -> "DataFrame":
    """Move the row kind (a tinyint) and the row sequence, when carried, last, by position
    (output names may repeat)."""
    names = out.columns
    kinds = [i for i, name in enumerate(names) if name == ROW_KIND_COLUMN]
    if len(kinds) != 1:
        raise TransformInputError(
            "query", f"Sql: the query's output has {len(kinds)} '{ROW_KIND_COLUMN}' fields; "
            f"select it once (output fields: {', '.join(names)})")
    sequences = [i for i, name in enumerate(names) if name == ROW_SEQ_COLUMN]
    if len(sequences) > 1:
        raise TransformInputError(
            "query", f"Sql: the query's output has {len(sequences)} '{ROW_SEQ_COLUMN}' fields, the "
            f"hidden place of each change in the source's order; select it once or not at all")
    temp = [f"_{i}" for i in range(len(names))]
    hidden = {kinds[0], *sequences}
    fields = [column(temp[i]).alias(name) for i, name in enumerate(names) if i not in hidden]
    kind = column(temp[kinds[0]]).cast("tinyint").alias(ROW_KIND_COLUMN)
    sequence = [column(temp[i]).cast("bigint").alias(ROW_SEQ_COLUMN) for i in sequences]
    return out.toDF(*temp).select(*fields, kind, *sequence)


def _insert_kind():
    from pyspark.sql import functions as F

    return F.lit(int(RowKind.INSERT)).cast("tinyint")
