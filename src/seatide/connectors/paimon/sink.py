"""Paimon sink: SeaTunnel's ``Paimon`` sink options; each micro-batch one Paimon commit at most."""

from __future__ import annotations

from seatide.connectors.paimon.options import SINK, check_catalog, split_keys
from seatide.connectors.paimon.target import PaimonSpec, PaimonTarget
from seatide.connectors.paimon.warehouse import warehouse_path
from seatide.plugin.base import Sink, SinkContext
from seatide.plugin.options import flatten
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ALL_KINDS, INSERT_ONLY
from seatide.plugin.sink_protocol import SinkTargets, Target
from seatide.plugin.tables import TableRoute
from seatide.store.target_identity import file_target


@register
class PaimonSink(Sink):
    """Writes rows into a Paimon table of a filesystem warehouse, with pypaimon (no JVM).

    Each micro-batch is written by pypaimon's writer where no snapshot names it, decided in the
    store, then committed as one snapshot whose commit identifier is the batch's id: a replay, a
    roll-forward and a zombie that decided in time find it and commit nothing (``commits``).
    With primary keys (``paimon.table.primary-keys``, else the input's), inserts and updates are
    upserts and deletes delete; without, rows are appended. Several tables of a multi-table
    input go to the tables their options name (``${database_name}``, ``${table_name}``).
    """

    plugin_name = "Paimon"
    options = SINK
    row_kind_hint = ("set paimon.table.primary-keys (or give the source's schema a primaryKey) so updates "
                     "and deletes apply by key, or put FilterRowKind before it")

    def check(self) -> None:
        check_catalog(self)
        self.primary_keys = split_keys(self.opts["paimon.table.primary-keys"])
        self.partition_keys = split_keys(self.opts["paimon.table.partition-keys"])
        if self.primary_keys and not set(self.partition_keys) <= set(self.primary_keys):
            raise self.invalid("paimon.table.primary-keys",
                               "option 'paimon.table.primary-keys' must hold every partition column "
                               f"({', '.join(self.partition_keys)}): Paimon finds a row by its key within a partition")
        props = self.opts["paimon.table.write-props"] or {}
        bucket = flatten(props).get("bucket")
        if bucket is not None and str(bucket).strip() not in ("-1",) and not str(bucket).strip().isdigit():
            raise self.invalid("paimon.table.write-props", f"paimon.table.write-props: bucket = {bucket} must be "
                                                           "a number of buckets, or -1 (dynamic)")
        # Changes (updates, deletes) apply by key only.
        self.accepted_row_kinds = ALL_KINDS if self.primary_keys else INSERT_ONLY

    @property
    def keeps_last_change_per_key(self) -> bool:
        return bool(getattr(self, "primary_keys", ()))      # set by check()

    def change_keys(self) -> "tuple[str, tuple[str, ...]] | None":
        return ("paimon.table.primary-keys", tuple(self.primary_keys)) if self.primary_keys else None

    @classmethod
    def table_defaults(cls, body: dict, table, multi_table: bool) -> dict:
        """No ``paimon.table.primary-keys``: the input's primary key (SeaTunnel creates the table with it)."""
        if table is None or table.primary_key is None or flatten(body).get("paimon.table.primary-keys") is not None:
            return body
        return {**body, "paimon.table.primary-keys": ",".join(table.primary_key.columns)}

    def spec(self) -> PaimonSpec:
        opts = self.opts
        props = {k: v for k, v in flatten(opts["paimon.table.write-props"] or {}).items() if not isinstance(v, dict)}
        return PaimonSpec(warehouse=opts["warehouse"], database=opts["database"], table=opts["table"],
                          schema_save_mode=opts["schema_save_mode"], data_save_mode=opts["data_save_mode"],
                          primary_keys=self.primary_keys, partition_keys=self.partition_keys, write_props=props)

    def open_targets(self, ctx: SinkContext | None, routes: list[TableRoute], multi: bool) -> SinkTargets:
        return PaimonTargets(ctx, routes, multi)


class PaimonTargets(SinkTargets):
    """Each route's table is its target; routes naming one table (shards merged) share it. Keyed by
    the warehouse's real path (one warehouse through a symlink or not, outside review 8b, F9); an
    earlier SeaTide keyed it as spelled (``spelled_key``)."""

    def target_key(self, route: TableRoute) -> str:
        opts = route.sink.opts
        return f"{file_target(warehouse_path(opts['warehouse']))}#{opts['database']}.{opts['table']}"

    def spelled_key(self, route: TableRoute) -> str:
        opts = route.sink.opts
        return f"{warehouse_path(opts['warehouse'])}#{opts['database']}.{opts['table']}"

    def let_go(self) -> None:
        """A batch ended, published or failed anywhere between stage and publish: each table's lock
        its batch held is let go, or a RECREATE_SCHEMA of another pipeline would wait for it."""
        for target in self._open.values():
            target.let_go()

    def deciding(self, parts: dict[str, dict]) -> None:
        """Each table's part on record as deciding before the store's write (``pending_batches``)."""
        for key, part in parts.items():
            self.target(key).deciding(part)

    def open_target(self, key: str, routes: list[TableRoute]) -> Target:
        fence = self.ctx.fence if self.ctx is not None else (lambda: None)
        job_id = self.ctx.job_id if self.ctx is not None else None
        return PaimonTarget(key, routes, routes[0].sink.spec(), fence, job_id)


__all__ = ["PaimonSink", "PaimonTargets"]
