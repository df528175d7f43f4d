"""One target table of the Jdbc sink as the one sink protocol sees it (``plugin.sink_targets.Target``):
its save modes (save_modes.py), through the connection of its group (``ConnectionGroup``: the targets
``JdbcTargets`` writes in one transaction a batch, targets.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from seatide.connectors.jdbc import save_modes
from seatide.connectors.jdbc.commit_record import CommitRecords
from seatide.connectors.jdbc.sink_session import open_session
from seatide.connectors.jdbc.target_table import TargetTable
from seatide.plugin.sink_targets import Target, modes_destroy
from seatide.plugin.tables import TableRoute


@dataclass
class ConnectionGroup:
    """The targets written through one connection, in one transaction per batch."""

    database: str | None                          # the database connected to (None: the URL's)
    tables: dict[str, TargetTable] = field(default_factory=dict)     # target key -> its table
    ready: bool = False                           # leftover staging tables dropped
    home: str | None = None                       # where its commit records live (``JdbcTargets.begin``)
    homed: bool = False                           # ... decided
    records: CommitRecords | None = None
    temporary: bool | None = None                 # whether the user may create temporary tables
    checked: set = field(default_factory=set)     # route indexes checked against their table


class JdbcTableTarget(Target):
    """One target table: its save modes (save_modes.py), through the connection of its group. ``owner``: the
    sink's ``JdbcTargets`` (targets.py, which imports this module), for its options, naming and records."""

    def __init__(self, key: str, routes: list[TableRoute], owner, group: ConnectionGroup, table: TargetTable):
        super().__init__(key, routes)
        self.owner = owner
        self.group = group
        self.table = table
        self.save_modes = table.lead.table is not None       # query mode writes no table of its own
        spec = table.lead.spec      # save_modes.plan carries these steps out (kept rows are asked first)
        self.destroys = self.destroys_when_planned = self.save_modes and \
            modes_destroy(spec.schema_save_mode, spec.data_save_mode)
        spellings = [*(owner.naming.spelled(r) for r in routes),
                     *(owner.naming.earlier(r, owner.multi) for r in routes),
                     *(owner.naming.key_first_read(r) for r in routes),
                     *owner.naming.job_spellings().get(key, ())]
        self.earlier_keys = [k for k in dict.fromkeys(spellings) if k != key]

    def _decision_names(self) -> tuple[str, ...]:
        """The door's names for the decision, then those a SeaTide before the job's records (49a0dac) gave a
        multi-table sink's, per sink: a record of any in the target database means the save modes were made."""
        names = self.save_mode_decisions
        if self.owner.multi:
            key = self.owner.save_modes_key
            names += tuple(f"{key}_{k}" for k in (self.table.key, *(r.key for r in self.table.routes.values())))
        return names

    def save_mode_plan(self, schema) -> dict | None:
        with open_session(self.owner.spec, self.group.database) as conn:
            return save_modes.plan(conn, self.table.lead, self._decision_names(), self.group.database,
                                   self.group.home, self.owner.sink_id, self.owner.attempt_fence,
                                   self.decide_save_modes)

    def check_save_modes(self, schema) -> None:
        """A look (``save_mode_plan`` carries its step out, and records it): what ``save_modes.plan`` and
        ``ensure`` would refuse (``save_modes.check_ahead``), the table changed in nothing."""
        if self.table.lead.table is not None:
            save_modes.check_ahead(self.table.lead, schema, self._decision_names(), self.group.database,
                                   self.group.home, lambda: open_session(self.owner.spec, self.group.database))

    def destroy(self, plan: dict, fence: Callable[[], None]) -> None:
        with open_session(self.owner.spec, self.group.database) as conn:
            save_modes.destroy(conn, self.table.lead, plan, self.owner.sink_id, fence, self.destroy_owed)

    def ensure(self, schema) -> None:
        if self.table.lead.table is not None and schema is not None:
            with open_session(self.owner.spec, self.group.database) as conn:
                save_modes.ensure(conn, self.table.lead, schema, self.key)


__all__ = ["ConnectionGroup", "JdbcTableTarget"]
