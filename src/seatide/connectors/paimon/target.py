"""A Paimon target: one table of a filesystem warehouse, on the one sink protocol (decided in the store).

* **prepare**: the save modes (``table_setup``) pass the protocol's door; ``ensure`` creates a
  missing table from the input's fields (CREATE_SCHEMA_WHEN_NOT_EXIST, RECREATE_SCHEMA), with
  ``paimon.table.primary-keys`` (default: the input's primary key), ``partition-keys`` and
  ``write-props``, or refuses (ERROR_WHEN_SCHEMA_NOT_EXIST, IGNORE).
* **stage**: the batch is collected to the driver in Arrow and written by pypaimon's writer into
  the table's bucket directories, where no snapshot names its files yet (readers see nothing);
  its commit messages are the part. A primary-key table gets the batch's last change per key
  (``changes``): its deleted keys as deletes, the rest as upserts; an append table its rows.
* **publish**: one commit of the messages, as the sink's commit user with the batch's id as
  commit identifier, unless a snapshot since staging holds it already (``commits``).

A writer holds the table's lock shared (``table_lock``) from staging a batch (its rows computed by
Spark first) until it is committed or the batch fails (``PaimonTargets.let_go``), and while it
creates or alters the table: a RECREATE_SCHEMA carried out late renames the table away
only holding it alone, so no batch is staged or committed while the table is away (``recreate``).

Staged files of a batch never decided (a crash, a zombie) are named by no snapshot: readers never
see them, and Paimon's orphan-file cleanup removes them.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

from seatide import failpoints
from seatide.connectors.paimon import changes, commits, pending_batches, recreate, row_kinds, table_setup
from seatide.connectors.paimon.arrow_types import conform, table_arrow_schema
from seatide.connectors.paimon.table_lock import held_alone_by
from seatide.connectors.paimon.warehouse import PaimonError, get_table, open_catalog
from seatide.plugin.base import Batch, StagedBatch
from seatide.plugin.rowkind import HIDDEN_COLUMNS, ROW_KIND_COLUMN, RowKind
from seatide.plugin.sink_protocol import Target, TargetRows
from seatide.plugin.sink_targets import modes_destroy
from seatide.plugin.tables import TableRoute

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PaimonSpec:
    warehouse: str
    database: str
    table: str
    schema_save_mode: str
    data_save_mode: str
    primary_keys: list[str]
    partition_keys: list[str]
    write_props: dict

    @property
    def name(self) -> str:
        return f"{self.database}.{self.table}"


class PaimonTarget(Target):
    def __init__(self, key: str, routes: list[TableRoute], spec: PaimonSpec, fence: Callable[[], None],
                 job_id: str | None = None):
        super().__init__(key, routes)
        self.spec = spec
        self.fence = fence
        # The commit users of every attempt and fresh start of the job (``commits.commit_user``): a
        # RECREATE_SCHEMA carried out late drops no snapshot but theirs (``recreate._nobody_since``)
        self.own_commits = f"T_{job_id}_" if job_id else None
        # Every writer of the table passes the door, APPEND_DATA too (as Jdbc's): it finds a destructive
        # decision another pipeline of the run recorded first and carries it out before its own rows,
        # which a drop carried out later (the decided table is gone then) never takes (review 7)
        self.save_modes = True
        self.destroys = modes_destroy(spec.schema_save_mode, spec.data_save_mode)
        self.catalog = open_catalog(spec.warehouse)
        self.drops_extra = False                 # the input's fields the table lacks are dropped (ignore)
        self.path = recreate.table_dir(self.catalog, spec.database, spec.table)
        self._writing = None                     # the table's lock, held shared from stage to publish
        self._staged: dict[tuple, str] = {}      # (commit user, identifier) staged under that hold: its record
        self.job_id = job_id
        self._planned = None                     # the save-mode plan this writer made (an on-time RECREATE's)

    def _table(self):
        return get_table(self.catalog, self.spec.database, self.spec.table)

    def _hold(self) -> None:
        if self._writing is None:
            self._writing = recreate.hold_for_writing(self.path, self.spec.name, f"a writer of {self.spec.name}",
                                                      self.fence)

    def let_go(self) -> None:
        """The table's lock let go: the batch staged is committed, or never will be by this writer."""
        self._staged.clear()        # never decided now: a batch let go is staged afresh (``pending_batches``)
        if self._writing is not None:
            self._writing, hold = None, self._writing
            hold.release()

    @contextmanager
    def _writing_briefly(self, make: bool = False):
        """Holding the table's lock shared for one step; kept when it was held already (a batch staged).
        Not taken where no database directory is (no table there to exclude), unless ``make``: the
        step makes the table (its lock file would make the database's directory)."""
        held = self._writing is not None
        if not held and not make and not os.path.isdir(os.path.dirname(self.path)):
            yield
            return
        self._hold()
        try:
            yield
        finally:
            if not held:
                self.let_go()

    # -- prepare ------------------------------------------------------------------------------
    def save_mode_plan(self, schema) -> dict | None:
        table = self._table()
        if table is None and recreate.renamed_away(self.path):
            with self._writing_briefly():   # put back if its RECREATE's carrier died, else its step ends first
                table = self._table()
        if table is None:
            return None
        self._refuse_rows(table)
        if self.spec.schema_save_mode == "RECREATE_SCHEMA":
            self._planned = {"recreate": table_setup.identity(table), "held": commits.latest_id(table),
                             "own": self.own_commits}
            return self._planned
        if self.spec.data_save_mode == "DROP_DATA" and table_setup.has_rows(table):
            return {"drop_data": commits.latest_id(table)}
        return None

    def check_save_modes(self, schema) -> None:
        """A look, no lock taken, nothing put back nor plan kept (``save_mode_plan`` keeps an on-time
        RECREATE's): what ``save_mode_plan`` and ``ensure`` would refuse. A table renamed away by a
        RECREATE_SCHEMA (in its step, or its carrier died and the next writer puts it back) is the table,
        where it lies: not missing, and its rows refused as the prepare that puts it back refuses them
        (outside review, finding 7). Looked for before and after the table, so that a rename or a
        put-back between the two looks is seen."""
        aside = recreate.moved_aside(self.path)
        table = self._table()
        if table is None:
            aside += [p for p in recreate.moved_aside(self.path) if p not in aside]
            if not aside:
                self._refuse_missing()
        else:
            self._refuse_rows(table)
        for copy in aside:
            self._refuse_rows(moved_to=copy, table_there=table is not None)

    def _refuse_rows(self, table=None, moved_to: str | None = None, table_there: bool = False) -> None:
        """Refused under ERROR_WHEN_DATA_EXISTS when ``table`` holds rows, or the table a RECREATE_SCHEMA
        renamed away to ``moved_to`` does (``check_save_modes``; ``table_there``: a table is at its path now)."""
        if self.spec.data_save_mode != "ERROR_WHEN_DATA_EXISTS":
            return
        if not (table_setup.has_rows(table) if moved_to is None else table_setup.has_rows_at(self.catalog.file_io,
                                                                                             moved_to)):
            return
        where = f" ({self._moved_aside(moved_to, table_there)})" if moved_to else ""
        raise PaimonError(f"Paimon sink: table {self.spec.name}{where} holds rows and data_save_mode is "
                          "ERROR_WHEN_DATA_EXISTS; empty it, or choose APPEND_DATA or DROP_DATA")

    def _moved_aside(self, moved_to: str, table_there: bool) -> str:
        """What is known, at this look, of a copy a RECREATE_SCHEMA renamed away (outside review F5: "its next
        writer puts it back" was said whoever held it, and also when no writer can put it back)."""
        said = f"renamed away to {moved_to} by a RECREATE_SCHEMA not carried out to its end"
        carrier = held_alone_by(self.path)
        if carrier is not None:
            return f"{said}; its carrier, {carrier}, holds the table now, and drops it or puts it back"
        if table_there:
            return (f"{said}, whose carrier died; a table was made at {self.path} since, so no writer can put it "
                    f"back: its rows are in {moved_to} until you restore it or remove it")
        return f"{said}, whose carrier died; the table's next writer puts it back"

    def _refuse_missing(self) -> None:
        if self.spec.schema_save_mode in ("ERROR_WHEN_SCHEMA_NOT_EXIST", "IGNORE"):
            raise PaimonError(f"Paimon sink: table {self.spec.name} does not exist and schema_save_mode is "
                              f"{self.spec.schema_save_mode}; create it, or choose CREATE_SCHEMA_WHEN_NOT_EXIST")

    def destroy(self, plan: dict, fence: Callable[[], None]) -> None:
        if "recreate" in plan:
            recreate.drop_if_same(self.catalog, self.spec.database, self.spec.table, plan, fence, self.destroy_owed,
                                  on_time=plan == self._planned)
        elif "drop_data" in plan:
            with self._writing_briefly():
                table = self._table()
                if table is not None:
                    table_setup.drop_data(table, plan["drop_data"], fence)

    def ensure(self, schema) -> None:
        if self._table() is not None:
            return
        if recreate.renamed_away(self.path):
            with self._writing_briefly():   # put back if its RECREATE's carrier died, else its step ends first
                if self._table() is not None:
                    return
        self._refuse_missing()
        if schema is None:
            return          # no fields known (a batch without a schema_of): created with its first rows
        from pyspark.sql.types import StructType

        struct = StructType([f for f in schema.fields if f.name not in HIDDEN_COLUMNS])
        with self._writing_briefly(make=True):      # never made while a RECREATE_SCHEMA has it renamed away
            table_setup.create(self.catalog, self.spec.database, self.spec.table, struct, self.spec.primary_keys,
                               self.spec.partition_keys, self.spec.write_props)

    # -- stage, then publish --------------------------------------------------------------------
    def stage(self, rows: TargetRows, batch: Batch) -> StagedBatch:
        if not rows.parts:
            return StagedBatch(publish={}, state={"rows": 0})
        frame = rows.union()
        data = frame.toArrow()      # Spark's work, not holding the table's lock: a RECREATE_SCHEMA may wait for it
        self._hold()                # until the batch is published, or given up (``PaimonTargets.let_go``)
        try:
            self.ensure(frame.schema)
        except BaseException:
            self.let_go()
            raise
        if data.num_rows == 0:
            self.let_go()
            return StagedBatch(publish={}, state={"rows": 0})
        part = self.stage_arrow(data, commits.commit_user(batch.transaction_id, batch.batch_id), batch.batch_id)
        return StagedBatch(publish=part, state={"rows": data.num_rows})

    def stage_arrow(self, data, user: str, identifier: int) -> dict:
        """The batch's rows ``data`` (Arrow) written into the table where no snapshot names them; its
        part. The table's lock stays held until the part is published (``publish``)."""
        self._hold()
        try:
            table = self._table()
            base = commits.latest_id(table)
            messages = self._write(table, data, user, identifier)
            part = {"user": user, "identifier": identifier, "base": base, "messages": commits.encode(table, messages),
                    "created": table_setup.identity(table)["created"]}
            if part["messages"]:    # on record before it is decided: a RECREATE of another job keeps it if marked
                self._staged[(user, identifier)] = pending_batches.record(self.path, part, self.job_id)
            failpoints.hit("paimon.staged")
            return part
        except BaseException:
            self.let_go()
            raise

    def _write(self, table, data, user: str, identifier: int) -> list:
        from pypaimon.write.table_write import StreamTableWrite

        target = table_arrow_schema(table)
        self._check_fields(data, target)
        hidden = [c for c in HIDDEN_COLUMNS if c in data.column_names]
        conformed = conform(data.drop_columns(hidden), target, self.spec.name)
        for name in hidden:
            conformed = conformed.append_column(name, data.column(name))
        writer = StreamTableWrite(table, user)
        try:
            if table.is_primary_key_table:
                net = changes.net_changes(conformed, list(table.primary_keys), self.spec.name)
                for kind, part in ((RowKind.DELETE, net.deletes), (RowKind.INSERT, net.upserts)):
                    if part.num_rows:
                        with row_kinds.writing(int(kind)):
                            writer.write_arrow(part)
                messages = writer.prepare_commit(identifier)
                if net.deletes.num_rows:
                    row_kinds.count_deletes(messages)
                return messages
            else:
                self._check_appends(conformed)
                writer.write_arrow(changes.user_part(conformed))
            return writer.prepare_commit(identifier)
        finally:
            writer.close()

    def _check_fields(self, data, target) -> None:
        have = {f.name.lower() for f in target}
        extra = [n for n in data.column_names if n not in HIDDEN_COLUMNS and n.lower() not in have]
        if extra and not self.drops_extra:
            raise PaimonError(f"Paimon sink: the input's fields {', '.join(extra)} have no column in table "
                              f"{self.spec.name} (columns: {', '.join(target.names)}); add them to the table, or "
                              "leave them out of the input (FieldMapper)")

    def _check_appends(self, data) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        if ROW_KIND_COLUMN not in data.column_names:
            return
        kinds = data.column(ROW_KIND_COLUMN)
        if pc.any(pc.is_in(kinds, pa.array([RowKind.UPDATE_BEFORE, RowKind.DELETE], kinds.type))).as_py():
            raise PaimonError(f"Paimon sink: table {self.spec.name} has no primary key, so updates and deletes "
                              "cannot be applied; write into a table with one (paimon.table.primary-keys)")

    def deciding(self, part: dict) -> None:
        """``part`` is about to be decided (the store's write next): its record marked deciding, durably,
        under the hold it was staged under (``pending_batches``: a RECREATE of another job keeps it). A hold
        let go since staging is refused, not taken again: a RECREATE may have removed the unmarked record and
        dropped the staged files meanwhile, and the batch decided then could never be committed."""
        if part.get("messages"):
            name = self._staged.pop((part["user"], part["identifier"]), None)
            if self._writing is None or name is None:
                raise PaimonError(
                    f"Paimon sink: table {self.spec.name}: batch {part['identifier']} is about to be decided, but "
                    "this writer let go of the table's lock since staging it, so a RECREATE_SCHEMA may have "
                    "dropped its staged files; it is not decided (a SeaTide defect: report it). Resume the job: "
                    "its next attempt stages the batch afresh")
            pending_batches.record(self.path, part, self.job_id, deciding=True, name=name)

    def publish(self, part: dict) -> None:
        if not part.get("messages"):
            self.let_go()
            return
        self._hold()        # a roll-forward's (its stager died): waits for a RECREATE_SCHEMA's step to end
        try:
            table = self._table()
            created = table_setup.identity(table)["created"] if table is not None else None
            if created is None or part.get("created", created) != created:     # an older part has no "created"
                raise PaimonError(
                    f"Paimon sink: table {self.spec.name}: the table its decided batch {part['identifier']} was "
                    f"staged into was dropped since (RECREATE_SCHEMA, or outside SeaTide), with the batch's files, "
                    "so the batch cannot be committed. Submit the job again as a new job to write its rows again")
            failpoints.hit("paimon.before_commit")
            if commits.commit_once(table, part["user"], part["identifier"], part["base"],
                                   commits.decode(table, part["messages"])):
                failpoints.hit("paimon.after_commit")
            pending_batches.committed(self.path, part["user"], part["identifier"])
        finally:
            self.let_go()

    # -- schema changes --------------------------------------------------------------------------
    def evolve(self, changes_: list, behaviour: str) -> None:
        self.drops_extra = behaviour in ("ignore", "try_evolve")
        for change in changes_:
            with self._writing_briefly():
                table_setup.evolve(self.catalog, self.spec.database, self.spec.table, change, behaviour,
                                   lambda name: name, self.fence)


__all__ = ["PaimonSpec", "PaimonTarget"]
