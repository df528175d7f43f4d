"""Where a sink's batches are recorded, as the one sink protocol (``plugin.sink_protocol``) uses
them; ``runtime.commit_log`` implements both (in the store, fenced by the attempt; or as files)."""

from __future__ import annotations

from typing import Protocol


class SinkLog(Protocol):
    """The local commit log: the state after each batch published (a mirror of the decisions)."""

    def committed(self, batch_id: int) -> dict | None: ...
    def commit(self, batch_id: int, state: dict) -> None: ...
    def applying(self, batch_id: int, targets: list[str]) -> None: ...
    def latest_state(self, before: int | None = None) -> dict: ...
    def intent(self, batch_id: int) -> dict | None: ...
    def prune(self, keep_from: int) -> None: ...


class SinkDecisions(Protocol):
    """The record of commit decisions for one sink of one pipeline."""

    def decided(self, batch_id: int, transaction_id: str) -> dict | None:
        """The manifest of a decided batch ({"publish": ..., "state": ...}), None if undecided."""

    def decide(self, batch_id: int, transaction_id: str, manifest: dict) -> dict:
        """The commit point; returns the manifest that stands decided. Raises if fenced off."""

    def published(self, batch_id: int, transaction_id: str) -> None:
        """The decided batch's files are in place."""

    def unpublished(self) -> list[tuple[int, str, dict]]:
        """(batch, transaction id, manifest) of decided batches not yet marked published."""

    def fence(self) -> None:
        """Raise unless the writer may still commit (before a sink's own commit point)."""

    def decide_once(self, key: str, plan: dict) -> dict:
        """A decision named ``key`` that is not a batch's (a save mode's): the first stands."""

    def may_destroy(self, key: str, target: str, earlier_keys: list[str]) -> dict | None:
        """Before a save mode that destroys is planned for ``target`` (a read): None when it may;
        the decision named ``key`` when another writer recorded one meanwhile (it stands); raises
        (permanently) when it may not, before anything is destroyed."""

    def recorded_once(self, key: str) -> dict | None:
        """The decision named ``key`` if one stands (a read: decides nothing)."""

    def owes_destroy(self, key: str, target: str, earlier_keys: list[str], carried_out=None) -> bool:
        """Asked by a target carrying out a recorded decision ``key`` its own record says was never
        carried out (a read): True when it may; False when nothing of it is owed (a later destructive
        decision of the target, in another scope, emptied it since: skipped, where ``carried_out(plan)``,
        the target's system's own record, says that one was carried out); raises (permanently) when it
        would destroy rows committed since (``store/owed_destroy.py``)."""


__all__ = ["SinkDecisions", "SinkLog"]
