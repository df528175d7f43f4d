"""The Iceberg sink's targets on the one sink protocol (``plugin.sink_protocol``): a target per
Iceberg table, decided in the store.

One path for every Iceberg sink: a multi-table input is a list of routes (each a source table,
its sink's options filled from the table's catalog), a single-table sink a list of one. Routes
whose options name the same table (``keys.table_key``: the catalog's location, its name in a SQL
catalog, and ``namespace.table``) are one target (shards of one table: their rows are staged
together, one key's changes ordered by ``__row_seq`` across them). Each
batch is staged target by target, decided once in the store, then published target by target as
one snapshot each, carrying the batch's transaction id: the catalogs cannot commit several
tables at once, so a crash can leave some tables committed; the next attempt rolls the decision
forward, skips each table whose snapshot of the batch exists and commits the others.

Records written before the port, read as the protocol's (a job resumed across the upgrade goes
on): a single table's state ``{"rows", "total_rows"}`` and a route list's ``{"rows", "tables":
{namespace.table: state}}``; a decided manifest's parts ``{"tables": {namespace.table: part}}``.
Their tables are named by the Iceberg table, not by route: ``previous_targets`` and
``publish_parts`` give each to its target. So are the records under the keys earlier versions
gave the table (``keys.hashed_key``, ``named_key``, ``located_key``, ``landed_key``), and the job's save-mode decisions
recorded under them (``Target.earlier_keys``, ``IcebergTarget.earlier_decision``).
"""

from __future__ import annotations

from dataclasses import replace

from seatide.connectors.iceberg.keys import hashed_key, landed_key, located_key, named_key, table_key
from seatide.connectors.iceberg.spec import IcebergSinkError
from seatide.connectors.iceberg.target import IcebergTarget
from seatide.plugin.sink_protocol import SinkTargets, Target, routes_of
from seatide.plugin.tables import TableRoute


class IcebergTargets(SinkTargets):
    decided_in_store = True      # staged, decided in the store; each table's commit is its "publish"

    def target_key(self, route: TableRoute) -> str:
        """The catalog's location (hashed), its name only in a SQL catalog, and the table
        (``keys.table_key``): also the name of the job's save-mode decision of the table, whichever
        of its sinks and pipelines comes first. Routes into two warehouses under one catalog name
        are two tables; one warehouse under two labels is one."""
        return table_key(route.sink.spec())

    def open_target(self, key: str, routes: list[TableRoute]) -> Target:
        ctx = self.ctx
        if self.multi:       # its own plugin id: the staging directory of each target is its own
            ctx = replace(ctx, plugin_id=f"{ctx.plugin_id}.{routes[0].key}")
        return IcebergTarget(key, routes, routes[0].sink.spec(), ctx, self._spellings(key, routes))

    def _spellings(self, key: str, routes: list[TableRoute]) -> list:
        """The options of every route of the job writing table ``key``: this sink's, and every
        Iceberg sink's (``SinkContext.job_sinks``). The keys earlier versions gave the table were
        spelled from each sink's own options (its catalog's label), and the job's decision is
        under the key of whichever sink prepared it first (as Jdbc's, review 31 N2)."""
        specs = [route.sink.spec() for route in routes]
        for sink in self.ctx.job_sinks if self.ctx is not None else ():
            if type(sink) is type(routes[0].sink):
                specs += [s for s in (r.sink.spec() for r in routes_of(sink, sink.routes)) if table_key(s) == key]
        return specs

    # -- the records of before the port: tables named namespace.table --------------------------
    def _by_table(self) -> dict[str, str]:
        return {route.sink.spec().name: self.key_of[route.index] for route in self.routes}

    def _rekeyed(self, targets: dict) -> dict:
        """Targets' records under an earlier key (``keys.hashed_key``, ``named_key``, ``located_key``, ``landed_key``) under
        their key: a version wrote the routes its key merged through the first's options, so the
        first's table."""
        earlier: dict[str, str] = {}
        for route in self.routes:
            spec = route.sink.spec()
            for spelled in (hashed_key(spec), landed_key(spec), located_key(spec), named_key(spec)):
                earlier.setdefault(spelled, self.key_of[route.index])
        keys = set(self.key_of.values())
        return {key if key in keys else earlier.get(key, key): value for key, value in targets.items()}

    def previous_targets(self, state: dict) -> dict[str, dict]:
        if state and "targets" not in state and "tables" in state:
            names = self._by_table()
            return {names[name]: table for name, table in state["tables"].items() if name in names}
        return self._rekeyed(super().previous_targets(state))

    def publish_parts(self, publish: dict) -> list[tuple[str, dict]]:
        if "targets" in publish:
            return list(self._rekeyed(publish["targets"]).items())
        if "tables" not in publish:
            return super().publish_parts(publish)
        names = self._by_table()
        missing = sorted(set(publish["tables"]) - set(names))
        if missing:
            raise IcebergSinkError(f"a decided batch holds files of Iceberg table {missing[0]}, which this sink no "
                                   "longer writes; resume with the job's earlier table list")
        return [(names[name], part) for name, part in publish["tables"].items()]


__all__ = ["IcebergSinkError", "IcebergTargets"]
