"""The one door for destructive steps: a target's save modes pass here (``plugin.sink_protocol``,
step 2, prepares every target through it)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable

from seatide import failpoints
from seatide.plugin.sink_records import SinkDecisions


def decision_name(scope: str, identity: str) -> str:
    """The name of the save-mode decision of the target ``identity`` (a target key) in ``scope``."""
    return f"{scope}@{hashlib.sha1(identity.encode()).hexdigest()[:16]}"


@dataclass
class SaveModeDoor:
    """Prepares targets; their save modes pass here. The decision of what a target's save modes
    destroy is recorded once per target and scope (``records``: fenced by the attempt and shared by
    every sink and every pipeline of the job), before it is carried out, so it is taken once
    whoever comes first and carried out by whoever comes: never a second decision that would take
    in what was written since (by this sink, another sink of the pipeline, or another pipeline).
    ``scope`` names the job's run, or the fresh start that began the pipeline's lineage (its save
    modes are made anew, ``runtime/sink_runs.py``; one scope for every pipeline that fresh start's
    decision starts over). Within a scope every writer carries the decision out before its first
    row; a decision it finds recorded may still be owed (its decider died before carrying it out)
    while another scope wrote since: the target asks ``records.owes_destroy`` then
    (``Target.destroy_owed``), which skips it or refuses it (``store/owed_destroy.py``, review 8, B).

    Whether the target may be destroyed at all (``records.may_destroy``: not over rows a pipeline
    that is not started over keeps) is asked before the plan when planning itself may destroy
    (``Target.destroys_when_planned``, Jdbc), so a refusal has destroyed nothing. Such a plan
    records its decision through ``Target.decide_save_modes`` right before its step, under its
    system's lock: asked again then, a writer that decided and committed meanwhile is found (its
    decision stands, nothing is destroyed), and one that comes later finds this decision and
    carries it out before its rows (review 7).

    ``start_gate`` (an attempt's, ``runtime/start_gate.py``; None for a tool or a test): called with the
    target's key before the save modes of a target that would remove data are decided or carried out;
    it returns once the attempt's start has settled, and raises when a pipeline of the attempt was
    refused at its start: nothing is destroyed for a job that is then refused."""

    records: SinkDecisions
    scope: str
    start_gate: Callable[[str], None] | None = None

    def key_of(self, identity: str) -> str:
        """The name of the save-mode decision of the target ``identity`` (a ``target_key``)."""
        return decision_name(self.scope, identity)

    def prepare(self, target, schema, written: bool, fence: Callable[[], None]) -> None:
        """Prepare ``target``, a ``plugin.sink_protocol.Target`` (not imported: the protocol imports
        this door); ``written``: the sink has written it already (its state is in the commit log)."""
        if target.save_modes and not written:
            if target.destroys and self.start_gate is not None:
                self.start_gate(target.key)
            names = self._names(target)
            target.decide_save_modes = lambda plan: self._decide(target, names, plan)
            failpoints.hit("sink.save_modes")
            record = self._standing(target, names)
            if record is None and target.destroys_when_planned:
                # raises when refused; a decision another writer recorded meanwhile stands
                record = self.records.may_destroy(names[0], target.key, list(target.earlier_keys))
            if record is None:
                failpoints.hit("sink.save_mode_plan")      # no decision found: another writer may decide now
                try:
                    plan = target.save_mode_plan(schema)
                except Exception:      # it refused what another writer of the job wrote once it decided: that stands
                    if (record := self._recorded(names)) is None:
                        raise
                else:
                    # A plan whose own check refused its step (rows kept since the look-up) is None: the
                    # decision to follow is asked again, never "nothing to destroy" recorded for the scope,
                    # which a writer with rows of its own there would follow (outside review of G's fix, F3)
                    if plan is None and target.destroys_when_planned:
                        record = self.records.may_destroy(names[0], target.key, list(target.earlier_keys))
                    record = record or self._decide(target, names, plan)
            failpoints.hit("sink.save_modes_decided")
            if record.get("destroy") is not None:
                target.destroy_owed = lambda carried_out: self.records.owes_destroy(
                    names[0], target.key, list(target.earlier_keys), carried_out)
                target.destroy(record["destroy"], fence)
        target.ensure(schema)

    def check_ahead(self, target, schema) -> None:
        """Before any target of the job is prepared, when one of them destroys (``SinkRun.check_ahead``):
        what ``target``'s save modes would refuse (``Target.check_save_modes``, a look that decides
        nothing), so that the job is refused before another target is emptied (outside review of
        e20cc14..8348a57, A). A refusal stands unless a decision of its save modes does (another writer
        of the job, or an earlier attempt of its run, decided them, perhaps while it looked: ``prepare``
        follows that decision and refuses nothing); asked only then, so a target that passes costs no
        read of the store."""
        if not target.save_modes and not target.refuses_ahead:
            return
        names = self._names(target)
        try:
            target.check_save_modes(schema)
        except Exception:
            if self._standing(target, names) is None:
                raise

    def _names(self, target) -> tuple[str, ...]:
        """The door's names for ``target``'s decision (``Target.save_mode_decisions``), set on it."""
        names = tuple(dict.fromkeys(map(self.key_of, [target.key, *target.earlier_keys])))
        target.save_mode_decisions = names
        return names

    def _standing(self, target, names: tuple[str, ...]) -> dict | None:
        """The decision of ``target``'s save modes that stands (under ``names``, or an earlier version's), if any."""
        return self._recorded(names) or target.earlier_decision(self)

    def _recorded(self, names: tuple[str, ...]) -> dict | None:
        return next(filter(None, map(self.records.recorded_once, names)), None)

    def _decide(self, target, names: tuple[str, ...], plan: dict | None) -> dict:
        """The decision that stands for ``target``: ``plan`` unless another writer's was recorded first."""
        return self.records.decide_once(names[0], {"target": target.key, "destroy": plan,
                                                   "earlier": list(target.earlier_keys)})


__all__ = ["SaveModeDoor", "decision_name"]
