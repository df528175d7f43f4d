"""One sink protocol: every sink is driven through a micro-batch the same way.

A sink receives its input's tables as *routes* (``plugin.tables.TableRoute``); a single table is
a route list of length one, never a second path. Routes land in *targets*, the places its system
holds (a directory, a Hive table, a database table), and several routes may share one (shards
merged into one table, two tables written into one path). A sink supplies only its system's
steps: a ``SinkTargets`` that names each route's target and opens a ``Target`` per name
(``Sink.open_targets``, every sink; ``open_sink`` opens them for one pipeline). This module owns
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
from typing import Callable

from seatide import failpoints
from seatide.plugin.base import Batch, Sink, SinkContext, StagedBatch
from seatide.plugin.save_mode_door import SaveModeDoor
from seatide.plugin.sink_records import SinkDecisions, SinkLog
from seatide.plugin.tables import TableRoute, routes_of, table_frames_of, with_empty_frame
from seatide.plugin.target_rows import RoutePart, TargetRows


# -- what a sink supplies --------------------------------------------------------------------
class Target:
    """One place a sink writes, with the steps only its system knows (``SinkTargets.open_target``
    makes one for all the routes whose ``target_key`` is ``key``)."""

    # True: the target has save modes that remove or refuse, decided through the ``SaveModeDoor``
    # before its first rows (a target may set it per instance, from its options).
    save_modes: bool = False
    # True: ``save_mode_plan`` carries a destructive step out itself (Jdbc: a table's rows have no
    # identity a plan could name), so the door asks the records whether it may destroy first.
    destroys_when_planned: bool = False
    # Keys an earlier SeaTide gave this target (before its key was normalised): a decision named
    # by one counts as the target's.
    earlier_keys: tuple[str, ...] | list[str] = ()
    # The door's names for this target's save-mode decision (its own first, then those of its
    # earlier keys), set before it asks for the plan: a system that records in its own store that
    # it carried the plan out names its record by the first and looks for them all (Jdbc).
    save_mode_decisions: tuple[str, ...] = ()
    # Set by the door with the names: records a plan as the target's decision (fenced, once per
    # target: returns the one that stands, raises when it may not destroy). A plan that carries its
    # step out itself calls it right before the step, under the lock its writers share (Jdbc).
    decide_save_modes: Callable[[dict | None], dict] | None = None
    # Set by the door before it carries a decision out (``destroy``): a target whose step, carried
    # out late, would take whatever is there since (a table's rows: Jdbc) asks it when its own record
    # says the step was never carried out, under its lock: False skips it (nothing of it is owed),
    # an exception refuses it (``SinkDecisions.owes_destroy``).
    destroy_owed: Callable[[Callable[[dict], bool]], bool] | None = None     # (carried_out) -> owed

    def __init__(self, key: str, routes: list[TableRoute]):
        self.key = key
        self.routes = routes

    # -- prepare ------------------------------------------------------------------------------
    def earlier_decision(self, door: "SaveModeDoor") -> dict | None:
        """The decision of the target's save modes that an earlier version recorded under names of
        its own in ``door.records`` (an earlier key, another shape), in the door's shape ``{"destroy":
        plan or None}``: it is the decision, carried out and never taken again. None: there is none."""

    def save_mode_plan(self, schema) -> dict | None:
        """What the save modes destroy when the target is prepared now, as JSON naming exactly
        that (files, a table's identity); None when they destroy nothing. Raises for a mode that
        refuses the target as it is (ERROR_WHEN_DATA_EXISTS): a decision another writer of the job
        recorded since stands instead, whatever it wrote after. Asked only while no decision of the
        target's save modes stands; ``schema``: the first route's fields."""

    def destroy(self, plan: dict, fence: Callable[[], None]) -> None:
        """Destroy what a decided plan names and nothing else; idempotent (a crash, a zombie and
        its replacement may each carry it out). A system with transactions calls ``fence`` in the
        destroying transaction, right before its commit."""

    def ensure(self, schema) -> None:
        """Make the target usable without destroying anything (create what is missing, check
        that it fits); once per process, at its first batch, with the target's rows or none."""

    # -- stage, then (after the decision) publish -----------------------------------------------
    def stage(self, rows: TargetRows, batch: Batch) -> StagedBatch:
        """Write the batch where no reader sees it and fix its final names; ``batch.previous_state``
        is this target's state after its last batch."""
        raise NotImplementedError

    def publish(self, part: dict) -> None:
        """Make a decided part visible; idempotent."""
        raise NotImplementedError

    def abort(self, batch_id: int, intent: dict) -> None:
        """Undo what an older SeaTide published before its commit (per its intent file)."""

    # -- or apply -------------------------------------------------------------------------------
    def apply(self, rows: TargetRows, batch: Batch) -> dict:
        """Write the batch and commit it in the target's own system (``batch.fence()`` right before
        that commit), or print or check it; returns the target's state after it, with ``"replayed":
        True`` when the target's own record says the batch was committed before (nothing written)."""
        raise NotImplementedError

    def evolve(self, changes: list, behaviour: str) -> None:
        """Before the first batch after its source tables changed (``plugin.evolution``): apply
        ``changes`` as ``behaviour`` says, so that looking again finds them applied (a crash may
        repeat the call). Called with no changes too, whenever the source follows schema changes.
        By default nothing: a target that writes whatever columns the rows have."""

    def end_of_data(self, state: dict) -> None:
        """A bounded pipeline has written everything; ``state``: this target's last committed."""


class SinkTargets:
    """What one sink writes in one pipeline: its routes, grouped into targets."""

    decided_in_store: bool = True   # True: stage, decide in the store, publish (files); False: targets apply rows
    keeps_rows: bool = True     # False: nothing kept that a replayed batch could double (no start record)

    def __init__(self, ctx: SinkContext | None, routes: list[TableRoute], multi: bool):
        self.ctx = ctx
        self.routes = routes
        self.multi = multi          # a multi-table input: each route's rows are named by its key
        self.key_of = {route.index: self.target_key(route) for route in routes}
        self._open: dict[str, Target] = {}

    def target_key(self, route: TableRoute) -> str:
        """The target ``route`` writes; routes with equal keys share one (default: a target each)."""
        return route.key

    def spelled_key(self, route: TableRoute) -> str | None:
        """The key an earlier SeaTide gave ``route``'s target, where ``target_key`` now names it
        otherwise (a path as spelled, before keys followed links): the records under it (states,
        decided parts, the save-mode decision) are the target's. None: there is none."""
        return None

    def open_target(self, key: str, routes: list[TableRoute]) -> Target:
        raise NotImplementedError

    def target(self, key: str) -> Target:
        if key not in self._open:
            routes = [r for r in self.routes if self.key_of[r.index] == key]
            if not routes:
                raise ValueError(f"a decided batch holds a part of target {key}, which this sink no longer "
                                 "writes; resume with the job's earlier table list")
            target = self._open[key] = self.open_target(key, routes)
            spelled = [k for k in map(self.spelled_key, routes) if k not in (None, key, *target.earlier_keys)]
            target.earlier_keys = [*target.earlier_keys, *dict.fromkeys(spelled)]
        return self._open[key]

    def keys(self) -> list[str]:
        return list(dict.fromkeys(self.key_of[r.index] for r in self.routes))

    def begin(self, batch: Batch) -> None:
        """Before a batch's targets are prepared; by default nothing (Jdbc picks where a multi-table sink's records live)."""

    def let_go(self) -> None:
        """A batch ended, published or failed anywhere: what its targets held for it is let go (Paimon's locks)."""

    def check_ahead(self, frames, written: dict) -> None:
        """Before the first target is prepared: every target's checks its save modes need not precede, so
        none is destroyed for a batch another then refuses (``written``: targets written). By default none."""

    def apply(self, work: dict[str, TargetRows], batch: Batch, before: dict[str, dict]) -> dict[str, dict]:
        """(``decided_in_store`` False) apply each target's rows; each target's state after it. By default each
        target in turn; a system that commits several targets in one transaction (one connection's) applies them here."""
        states = {}
        for key, rows in work.items():
            states[key] = self.target(key).apply(rows, replace(batch, previous_state=before.get(key, {})))
            failpoints.hit("sink.table_published")     # applied: committed and visible
        return states

    def check_batch(self, state: dict) -> None:
        """The state after a batch, before it is decided or committed: raise to fail it (Assert)."""

    def deciding(self, parts: dict[str, dict]) -> None:
        """The staged ``parts`` (by target key) are decided next, still held as staged (Paimon marks its records)."""

    def evolve(self, changes: list, behaviour: str) -> None:
        for key in self.keys():
            target = self.target(key)
            names = {r.name for r in target.routes}
            target.evolve([c for c in changes if not self.multi or c.table in names], behaviour)

    def end_of_data(self, state: dict) -> None:
        before = self.previous_targets(state)
        for key in self.keys():
            self.target(key).end_of_data(before.get(key, {}))

    # -- the shapes of the records (and those written before targets existed) -------------------
    def previous_targets(self, state: dict) -> dict[str, dict]:
        """Each target's state after its last batch, from the state committed with a batch;
        a state written before targets existed gives its tables' (or its one table's) to theirs."""
        if not state or "targets" in state:
            return self._respelled(state.get("targets", {}))
        if "tables" in state:
            names = {r.name: self.key_of[r.index] for r in self.routes}
            return {names[name]: table for name, table in state["tables"].items() if name in names}
        return {key: state for key in self.keys()}

    def _respelled(self, targets: dict) -> dict:
        """Records under a route's ``spelled_key``, under its key; a record under the key itself wins."""
        earlier = {spelled: self.key_of[r.index] for r in self.routes if (spelled := self.spelled_key(r)) is not None}
        found = {key: value for key, value in targets.items() if key not in earlier}
        for key, value in targets.items():
            found.setdefault(earlier.get(key, key), value)
        return found

    def batch_state(self, previous: dict, states: dict[str, dict]) -> dict:
        rows = sum(int(s.get("rows", 0)) for s in states.values())
        return {"rows": rows, "total_rows": int(previous.get("total_rows", 0)) + rows,
                "targets": {**self.previous_targets(previous), **states}}

    def publish_record(self, parts: dict[str, dict]) -> dict:
        return {"targets": parts}

    def publish_parts(self, publish: dict) -> list[tuple[str, dict]]:
        """(target key, part) of a decided manifest; one decided before targets existed gives each
        table's part to its target (by route key), or its one part to the sink's one target."""
        if "targets" in publish:
            return list(self._respelled(publish["targets"]).items())
        if "tables" in publish:
            by_route = {r.key: self.key_of[r.index] for r in self.routes}
            return [(by_route.get(route_key, route_key), part) for route_key, part in publish["tables"].items()]
        return [(key, publish) for key in self.keys()]


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
        for key in self.targets.keys():
            if key in self._prepared:
                continue
            target = self.targets.target(key)
            schema = frames.schema_of(target.routes[0].index) if frames.schema_of is not None else None
            self.door.prepare(target, schema, key in written, self.decisions.fence)
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
