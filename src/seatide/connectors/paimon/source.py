"""Paimon source: SeaTunnel's ``Paimon`` source options over a filesystem warehouse, with pypaimon.

* BATCH without checkpoints: the table as of its newest snapshot, its splits read by Spark's Python
  workers (a primary-key table merged by key: every row once, as an insert).
* With micro-batches (STREAMING, or BATCH with ``checkpoint.interval``): first the table as of
  the newest snapshot, then what every later snapshot adds, with each row's kind (a primary-key
  table's updates and deletes), from Spark's checkpointed snapshot position
  (``snapshot_stream``). BATCH ends at the snapshot that was newest when the job started;
  STREAMING follows new snapshots at the job's trigger interval.
* ``query``: its columns and its filter, applied by Spark to what is read.
"""

from __future__ import annotations

from seatide.connectors.paimon.options import SOURCE, check_catalog
from seatide.connectors.paimon.warehouse import PaimonError, get_table, open_catalog, warehouse_path
from seatide.plugin.base import ReadContext, Source, use_python_data_source
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ALL_KINDS, HIDDEN_COLUMNS, INSERT_ONLY, RowKind, hidden_fields


class PaimonQueryError(ValueError):
    pass


def parse_query(text: str, table: str) -> tuple[list[str] | None, str | None]:
    """(the columns selected, None for *; the WHERE condition as Spark SQL, or None)."""
    import sqlglot
    from sqlglot import expressions as E

    try:
        tree = sqlglot.parse_one(text, read="mysql")
    except sqlglot.errors.ParseError as exc:
        raise PaimonQueryError(f"cannot be parsed: {str(exc).splitlines()[0]}") from None
    if not isinstance(tree, E.Select):
        raise PaimonQueryError("must be a select ... from <table> [where ...]")
    for clause in ("group", "having", "order", "limit", "joins"):
        if tree.args.get(clause):
            raise PaimonQueryError(f"{clause.upper()} is not supported (columns and a where filter are)")
    source = tree.args.get("from") or tree.args.get("from_")
    if source is None or source.this.name.lower() != table.lower():
        raise PaimonQueryError(f"must read from table {table}")
    columns: list[str] | None = []
    for item in tree.expressions:
        if isinstance(item, E.Star):
            columns = None
            break
        if not isinstance(item, E.Column):
            raise PaimonQueryError(f"selects {item.sql()}; only columns (or *) can be selected")
        columns.append(item.name)
    where = tree.args.get("where")
    return columns, (where.this.sql(dialect="spark") if where is not None else None)


@register
class PaimonSource(Source):
    plugin_name = "Paimon"
    options = SOURCE

    def check(self) -> None:
        check_catalog(self)
        self.columns, self.where = None, None
        if self.opts["query"]:
            try:
                self.columns, self.where = parse_query(self.opts["query"], self.opts["table"])
            except PaimonQueryError as exc:
                raise self.invalid("query", f"option 'query' {exc}") from None

    def _table(self):
        table = get_table(open_catalog(self.opts["warehouse"]), self.opts["database"], self.opts["table"])
        if table is None:
            raise PaimonError(f"Paimon source: table {self.opts['database']}.{self.opts['table']} does not exist in "
                              f"warehouse {self.opts['warehouse']}")
        return table

    def row_kinds(self) -> frozenset[RowKind]:
        """A primary-key table's later snapshots hold updates and deletes; a STREAMING job reads them."""
        if self.env is None or not self.env.streaming:
            return INSERT_ONLY
        table = get_table(open_catalog(self.opts["warehouse"]), self.opts["database"], self.opts["table"])
        return ALL_KINDS if table is not None and table.is_primary_key_table else INSERT_ONLY

    def read(self, ctx: ReadContext):
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        from seatide.connectors.paimon.arrow_types import spark_struct, table_arrow_schema
        from seatide.connectors.paimon.scan import head
        from seatide.connectors.paimon.snapshot_stream import SOURCE_NAME, PaimonDataSource, source_options

        table = self._table()
        name = f"{self.opts['database']}.{self.opts['table']}"
        struct = spark_struct(table_arrow_schema(table), name)
        if self.columns is not None:
            missing = [c for c in self.columns if c not in struct.names]
            if missing:
                raise PaimonError(f"Paimon source: option 'query' selects {', '.join(missing)}, which table {name} "
                                  f"does not have (columns: {', '.join(struct.names)})")
        full = StructType([*struct.fields, *hidden_fields(sequenced=True)])
        use_python_data_source(ctx.spark, PaimonDataSource)
        options = source_options(warehouse=warehouse_path(self.opts["warehouse"]), database=self.opts["database"],
                                 table=self.opts["table"], schema_json=full.json(),
                                 partitions=max(1, ctx.parallelism * 2), snapshot=head(table),
                                 bounded_head=None if ctx.unbounded else head(table),
                                 max_rows=ctx.max_rows_per_batch if ctx.micro_batch else 0)
        reader = ctx.spark.readStream if ctx.micro_batch else ctx.spark.read
        df = reader.format(SOURCE_NAME).options(**options).schema(full).load()
        if self.where:
            df = df.filter(F.expr(self.where))
        if self.columns is not None:
            df = df.select(*[F.col(f"`{c}`") for c in self.columns], *HIDDEN_COLUMNS)
        return df


__all__ = ["PaimonSource", "parse_query"]
