"""One sink protocol: every sink is driven through a micro-batch the same way.

A sink receives its input's tables as *routes* (``plugin.tables.TableRoute``); a single table is
a route list of length one, never a second path. Routes land in *targets*, the places its system
holds (a directory, a Hive table, a database table), and several routes may share one (shards
merged into one table, two tables written into one path). A sink supplies only its system's
steps: a ``SinkTargets`` that names each route's target and opens a ``Target`` per name
(``Sink.open_targets``, every sink; ``open_sink`` opens them for one pipeline; both declared in
``plugin/sink_targets.py``). This module owns
the order and the records (``SinkRun``), for one batch:

1. **Done?** A batch in the local commit log is skipped; a decided one is published again
   (rolled forward), never staged again. At pipeline start every decided, unpublished batch
   is rolled forward before anything else runs.
2. **Prepare** every target of the sink's routes at the first batch this process runs, with its
   rows or none (as SeaTunnel makes every table's save modes when the job starts: a CDC stream's
   first batch, the snapshot of empty tables, has no rows, and its targets must exist after it):
   once per target, however many routes (or sinks and pipelines of the job) write it. Its save
   modes pass the one door for destructive steps (``SaveModeDoor``): unless the sink has written
   the target already (its state is in the commit log), what they destroy is decided once per
   target, in a record fenced by the attempt, and only that is destroyed. So a zombie that
   repeats the step, a second table of the target first seen later, a table added on resume, or
   a restart before the target's first rows destroys nothing written since.
3. **Stage** each target that has rows, every route writing it together (``TargetRows``),
   where no reader looks.
4. **Decide**: ONE fenced store write of the batch's manifest (each target's part and the
   state after the batch). A zombie's decision is refused; the first decision stands.
5. **Publish** each target's part, idempotently (a crash half-way, a replay, and a zombie that
   decided in time publish it once), then commit the state to the local commit log.

A sink whose targets commit in their own system (``SinkTargets.decided_in_store = False``)
*applies* each target instead of steps 3–5: the rows and its record of the batch in one
transaction of the target, ``Batch.fence`` checked right before that commit (a database);
or, with nothing transactional, prints or checks them (Console, Assert).

One key's changes: a target gets every route that writes it in one ``TargetRows``, and a sink
that keeps the last change per key picks it by ``__row_seq`` across all of them
(``TargetRows.union``), so a key moved between routes within a batch ends as its last change says.

The state committed with a batch is ``{"rows", "total_rows", "targets": {target key: state}}``;
a target keeps its state through batches without its rows, and its state's presence is the
record that the sink has written it. Failpoints: ``sink.save_modes`` (before a target's save
modes are decided), ``sink.save_mode_plan`` (none found decided, before the plan),
``sink.save_modes_decided``, ``sink.before_decision``, ``sink.after_decision``, ``sink.table_published``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from seatide import failpoints
from seatide.plugin.base import Batch, Sink, SinkContext
from seatide.plugin.save_mode_door import SaveModeDoor
from seatide.plugin.sink_records import SinkDecisions, SinkLog
from seatide.plugin.sink_targets import SinkTargets, Target
from seatide.plugin.tables import TableFrames, TableRoute, routes_of, table_frames_of, with_empty_frame
from seatide.plugin.target_rows import RoutePart, TargetRows


# -- the runtime's half ------------------------------------------------------------------------
@dataclass
class BatchResult:
    batch_id: int
    state: dict
    replayed: bool     # True: decided by an earlier attempt (rolled forward if need be); nothing written


class SinkRun:
    """One sink of one pipeline, batch by batch, through the protocol (see the module doc)."""

    def __init__(self, targets: SinkTargets, log: SinkLog, decisions: SinkDecisions, door: SaveModeDoor,
                 transaction_prefix: str, staging_tag: str = "", save_modes_key: str = ""):
        self.targets = targets
        self.log = log
        self.decisions = decisions
        self.door = door
        self.transaction_prefix = transaction_prefix   # a batch's id: this, then its number
        self.staging_tag = staging_tag      # this attempt's own staging: a zombie's never mixes with its replacement's
        self.save_modes_key = save_modes_key    # the sink's own decisions' key (``Batch.save_modes_key``)
        self._prepared: set[str] = set()

    def roll_forward(self) -> list[int]:
        """At pipeline start: publish every batch decided but not yet published; their ids."""
        if not self.targets.decided_in_store:
            return []
        done = []
        for batch_id, transaction_id, manifest in self.decisions.unpublished():
            self._publish(batch_id, transaction_id, manifest)
            done.append(batch_id)
        return done

    def write(self, frames, batch_id: int, transaction_id: str | None = None) -> BatchResult:
        """Run one batch (a DataFrame, or a routed ``TableFrames``) at most once, whatever crashed before."""
        transaction_id = transaction_id or f"{self.transaction_prefix}{batch_id}"
        done = self.log.committed(batch_id)
        if done is not None:
            return BatchResult(batch_id, done, replayed=True)
        decided = self.decisions.decided(batch_id, transaction_id)
        if decided is not None:
            return BatchResult(batch_id, self._publish(batch_id, transaction_id, decided), replayed=True)
        previous = self.log.latest_state(before=batch_id)
        batch = Batch(batch_id=batch_id, transaction_id=transaction_id, previous_state=previous,
                      fence=self.decisions.fence, staging_tag=self.staging_tag,
                      decide_once=self.decisions.decide_once, save_modes_key=self.save_modes_key)
        leftover = self.log.intent(batch_id)
        if leftover is not None:
            for key in self.targets.keys():
                self.targets.target(key).abort(batch_id, leftover)
        before = self.targets.previous_targets(previous)
        work = self._rows(frames, transaction_id)
        self.targets.begin(batch)
        self._prepare(frames, before)
        if self.targets.decided_in_store:
            try:
                return self._stage_decide_publish(work, batch, before, previous)
            finally:        # published or failed between stage and publish: never a hold kept while the driver lives
                self.targets.let_go()
        # A sink that applies decides in its target's own commit: its steps are named alike (zombies, crashes)
        failpoints.hit("sink.before_decision")
        if self.targets.keeps_rows:     # seen before that commit by a fresh start's save modes (review 8, G)
            self.log.applying(batch_id, list(work))
        states = self.targets.apply(work, batch, before)
        failpoints.hit("sink.after_decision")
        state = self.targets.batch_state(previous, states)
        self.targets.check_batch(state)
        self.decisions.fence()
        self.log.commit(batch_id, state)
        replayed = bool(states) and all(s.get("replayed") for s in states.values())    # each target's record had it
        return BatchResult(batch_id, state, replayed=replayed)

    def destroys_ahead(self) -> bool:
        """A target not yet prepared (nor written) has save modes that destroy when carried out
        (``Target.destroys``, any sink's): the job's other sinks check everything ahead of it."""
        return self._destroys(self.targets.previous_targets(self.log.latest_state()))

    def _destroys(self, written: dict) -> bool:
        return any(self.targets.target(key).destroys for key in self.targets.keys()
                   if key not in self._prepared and key not in written)

    def check_ahead(self, frames=None, others_destroy: bool = False) -> None:
        """Before any sink of the job prepares a target (``runtime.pipeline_start.check_sinks_ahead`` asks every
        sink of the pipelines that start together, then lets the first batch run): this sink's checks of its
        targets not yet prepared (``SinkTargets.begin``, ``SinkTargets.check_ahead``), so that no sink's save
        modes destroy anything for a job another sink then refuses. ``frames``: the sink's input (a
        DataFrame, or ``TableFrames`` whose ``schema_of`` may be None: the fields are known at the first
        batch, whose own checks ahead come before its targets are prepared, as ever); ``others_destroy``:
        another sink of the job ``destroys_ahead``: then what the save modes of each target would refuse is
        asked too (``_check_refusals``), so that ERROR_WHEN_DATA_EXISTS refuses before a DROP_DATA. Raises to refuse."""
        if all(key in self._prepared for key in self.targets.keys()):
            return
        previous = self.log.latest_state()
        self.targets.begin(Batch(batch_id=-1, transaction_id="", previous_state=previous, fence=self.decisions.fence,
                                 staging_tag=self.staging_tag, decide_once=self.decisions.decide_once,
                                 save_modes_key=self.save_modes_key))
        frames = table_frames_of(frames) if frames is not None else TableFrames({})
        written = self.targets.previous_targets(previous)
        self.targets.check_ahead(frames, written, others_destroy)
        if others_destroy:
            self._check_refusals(frames, written)

    def _check_refusals(self, frames: TableFrames, written: dict) -> None:
        """What the save modes of each target not yet prepared nor written would refuse, asked through the
        door (``SaveModeDoor.check_ahead``: a look, none where a decision stands), before any target of the
        job is destroyed: a refusal decided at the target's own first batch came after another sink's
        DROP_DATA (outside review of e20cc14..8348a57, A)."""
        for key in self.targets.keys():
            if key not in self._prepared and key not in written:
                target = self.targets.target(key)
                self.door.check_ahead(target, self._schema(frames, target))

    @staticmethod
    def _schema(frames: TableFrames, target: Target):
        """The target's first route's fields, None where not known (``TableFrames.schema_of``)."""
        return frames.schema_of(target.routes[0].index) if frames.schema_of is not None else None

    def _stage_decide_publish(self, work: dict[str, TargetRows], batch: Batch, before: dict, previous: dict):
        parts, states = {}, {}
        for key, rows in work.items():
            staged = self.targets.target(key).stage(rows, replace(batch, previous_state=before.get(key, {})))
            parts[key], states[key] = staged.publish, staged.state
        state = self.targets.batch_state(previous, states)
        self.targets.check_batch(state)
        failpoints.hit("sink.before_decision")
        self.targets.deciding(parts)
        record = {"publish": self.targets.publish_record(parts), "state": state}
        decided = self.decisions.decide(batch.batch_id, batch.transaction_id, record)
        failpoints.hit("sink.after_decision")
        return BatchResult(batch.batch_id, self._publish(batch.batch_id, batch.transaction_id, decided), False)

    def evolve(self, changes: list, behaviour: str) -> None:
        self.targets.evolve(changes, behaviour)

    def end_of_data(self) -> None:
        self.targets.end_of_data(self.log.latest_state())

    def prune(self, keep_from: int) -> None:
        self.log.prune(keep_from)

    def _rows(self, frames, transaction_id: str) -> dict[str, TargetRows]:
        """Each target's rows in the batch: the routes present (a single table: always its one route,
        an empty frame when the batch has none of its rows)."""
        frames = table_frames_of(frames)
        targets = self.targets
        grouped: dict[str, list[RoutePart]] = {}
        for route in targets.routes:
            if route.index not in frames.frames:
                if targets.multi:
                    continue
                frames = with_empty_frame(frames, route.index)
            suffix = f"_{route.key}" if targets.multi else ""
            grouped.setdefault(targets.key_of[route.index], []).append(
                RoutePart(route, f"{transaction_id}{suffix}", frames))
        return {key: TargetRows(tuple(parts), frames) for key, parts in grouped.items()}

    def _prepare(self, frames, written: dict) -> None:
        """Every target not yet prepared in this process, whether the batch has its rows or not;
        ``schema``: its first route's fields (``TableFrames.schema_of`` gives a table's without rows)."""
        frames = table_frames_of(frames)
        if any(key not in self._prepared for key in self.targets.keys()):
            self.targets.check_ahead(frames, written)
            if self._destroys(written):       # one target's refusal before another's destruction, within the sink
                self._check_refusals(frames, written)
        for key in self.targets.keys():
            if key in self._prepared:
                continue
            target = self.targets.target(key)
            self.door.prepare(target, self._schema(frames, target), key in written, self.decisions.fence)
            self._prepared.add(key)

    def _publish(self, batch_id: int, transaction_id: str, manifest: dict) -> dict:
        """Publish a decided batch (again): idempotent, whoever decided it. Returns its state."""
        if self.log.committed(batch_id) is None:    # else only the mark was missing (a crash just before it)
            for key, part in self.targets.publish_parts(manifest["publish"]):
                self.targets.target(key).publish(part)
                failpoints.hit("sink.table_published")     # a crash with some targets published, not all
            self.log.commit(batch_id, manifest["state"])
        self.decisions.published(batch_id, transaction_id)
        return manifest["state"]


# -- opening a sink ----------------------------------------------------------------------------
def open_sink(sink: Sink, ctx: SinkContext | None, routes: list[TableRoute] | None = None) -> SinkTargets:
    """The sink's targets for one pipeline (``Sink.open_targets``), as the runtime (or a test) opens
    them; ``routes``: a multi-table input's (None: one table, a route list of length one)."""
    return sink.open_targets(ctx, routes_of(sink, routes), bool(routes))


__all__ = ["BatchResult", "RoutePart", "SaveModeDoor", "SinkRun", "SinkTargets", "Target", "TargetRows",
           "open_sink", "routes_of"]
