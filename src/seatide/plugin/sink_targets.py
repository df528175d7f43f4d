"""What a sink supplies to the one sink protocol (``plugin/sink_protocol.py``, which drives them):
a ``SinkTargets`` that names each route's target and opens a ``Target`` per name, with the steps
only its system knows (prepare, stage and publish, or apply). Every method here documents when the
protocol calls it; the order and the records are the protocol's, never a sink's."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Callable

from seatide import failpoints
from seatide.plugin.base import Batch, SinkContext, StagedBatch
from seatide.plugin.tables import TableRoute
from seatide.plugin.target_rows import TargetRows

if TYPE_CHECKING:
    from seatide.plugin.save_mode_door import SaveModeDoor

def modes_destroy(schema_save_mode: str, data_save_mode: str) -> bool:
    """The save modes remove what a target holds when it is prepared (RECREATE_SCHEMA, DROP_DATA,
    CUSTOM_PROCESSING's statement), in every sink that offers them."""
    return schema_save_mode == "RECREATE_SCHEMA" or data_save_mode in ("DROP_DATA", "CUSTOM_PROCESSING")


class Target:
    """One place a sink writes, with the steps only its system knows (``SinkTargets.open_target``
    makes one for all the routes whose ``target_key`` is ``key``)."""

    # True: the target has save modes that remove or refuse, decided through the ``SaveModeDoor``
    # before its first rows (a target may set it per instance, from its options).
    save_modes: bool = False
    # True: ``save_mode_plan`` carries a destructive step out itself (Jdbc: a table's rows have no
    # identity a plan could name), so the door asks the records whether it may destroy first.
    destroys_when_planned: bool = False
    # True: its save modes destroy when the target is prepared (``modes_destroy``), whoever carries
    # the step out: the job's other sinks are checked ahead of it (``SinkRun.destroys_ahead``).
    destroys: bool = False
    # True: ``check_save_modes`` refuses what ``ensure`` or ``stage`` would (a missing table under IGNORE,
    # columns the input lacks) even where no decision passes the door (``save_modes`` False): it is
    # asked ahead all the same (``SaveModeDoor.check_ahead``).
    refuses_ahead: bool = False
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

    def check_save_modes(self, schema) -> None:
        """A look at what the save modes would refuse now, deciding and changing nothing: raises as
        ``save_mode_plan`` would (ERROR_WHEN_DATA_EXISTS over rows, ERROR_WHEN_SCHEMA_NOT_EXIST on a
        missing target). Asked before any target of the job is prepared, when one of them destroys, while
        no decision of this target's save modes stands (``SaveModeDoor.check_ahead``), so that a refusal
        comes before another target is emptied. By default ``save_mode_plan``, whose plan names what the
        save modes destroy without destroying it (a look, the target's refusal under DROP_DATA too), except
        where it carries a step out itself (``destroys_when_planned``: Jdbc overrides this)."""
        if not self.destroys_when_planned:
            self.save_mode_plan(schema)

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
        """Before a batch's targets are prepared; by default nothing (Jdbc picks where a multi-table sink's records live).
        Also before the job's first batch, with ``batch_id`` -1, when the job's sinks are checked ahead together
        (``SinkRun.check_ahead``): a refusal raised here fails the job before any sink of it prepared a target."""

    def let_go(self) -> None:
        """A batch ended, published or failed anywhere: what its targets held for it is let go (Paimon's locks)."""

    def check_ahead(self, frames, written: dict, others_destroy: bool = False) -> None:
        """Before the first target is prepared: every target's checks its save modes need not precede, so
        none is destroyed for a batch another then refuses (``written``: targets written). Asked of every
        sink of the job before any of them prepares a target (``SinkRun.check_ahead``: ``frames.schema_of``
        may be None there; ``others_destroy``: another sink of the job destroys when it prepares its
        targets, so checks made only ahead of one's own destruction are made too), and again at the
        sink's first batch. By default none."""

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


__all__ = ["SinkTargets", "Target"]
