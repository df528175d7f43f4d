"""Exactly-once sinks: a batch is decided once, by the current attempt, then published.

A file sink (LocalFile) commits one micro-batch in three steps:

1. **Stage.** Spark writes the batch under the output's hidden ``.seatide-staging`` directory,
   in a directory of this attempt's own; the final name of every file is fixed. Nothing is
   visible to a reader of the output yet.
2. **Decide.** ONE fenced store write (``AttemptReporter.decide_batch``) records the batch's
   manifest: the staged files with their final names, and the sink's state after the batch.
   This is the batch's commit point. It is refused (``AttemptFenced``) once the driver's
   attempt is no longer the job's current one, so a zombie driver decides nothing and
   therefore publishes nothing.
3. **Publish.** The files are moved into place (``os.replace``, idempotent), the state is
   written to the local commit log below, and the manifest is marked PUBLISHED.

Recovery, whichever attempt (or whichever replay of the batch) comes next:

* a batch with a local commit is done: skipped;
* a batch with a decision is rolled forward: its manifest is published again (files already
  moved are left alone), never redone; pipeline start-up rolls forward every decided,
  unpublished batch too;
* a batch without a decision is aborted: its staging is deleted and the batch is redone.

Sinks that commit in their own system (Jdbc: the rows and a batch-id record in one database
transaction) keep their own commit point; they call ``Batch.fence`` right before it (see
``connectors/jdbc/writer.py`` and docs/operations.md, "Sinks and zombie drivers").

Local commit log, under the pipeline's checkpoint directory::

    sinks/<plugin_id>/commit/<batch>.json      the state after a published batch
    sinks/<plugin_id>/intent/<batch>.json      (written by SeaTide before the decision existed:
                                               a replay undoes what it lists)
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from typing import Protocol

from seatide import failpoints
from seatide.plugin.base import Batch, SinkWriter, StagedBatch

_BATCH_FILE = re.compile(r"^(\d+)\.json$")


def write_json_atomic(path: str, payload: dict) -> None:
    """Write a small JSON file so readers see the old or the new content, never a part."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    with os.fdopen(fd, "w") as handle:
        json.dump(payload, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def read_json(path: str) -> dict | None:
    try:
        with open(path) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None


@dataclass
class SinkCommitLog:
    root: str   # <checkpoint dir>/sinks/<plugin_id>

    def _path(self, area: str, batch_id: int) -> str:
        return os.path.join(self.root, area, f"{batch_id}.json")

    def committed(self, batch_id: int) -> dict | None:
        return read_json(self._path("commit", batch_id))

    def intent(self, batch_id: int) -> dict | None:
        """What an older SeaTide published before its commit (it wrote intents; this one does not)."""
        return read_json(self._path("intent", batch_id))

    def commit(self, batch_id: int, state: dict) -> None:
        write_json_atomic(self._path("commit", batch_id), state)
        try:
            os.remove(self._path("intent", batch_id))
        except FileNotFoundError:
            pass

    def batch_ids(self) -> list[int]:
        try:
            names = os.listdir(os.path.join(self.root, "commit"))
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for m in map(_BATCH_FILE.match, names) if m)

    def latest_state(self, before: int | None = None) -> dict:
        """State of the newest committed batch (older than ``before`` when given)."""
        ids = [b for b in self.batch_ids() if before is None or b < before]
        return (self.committed(ids[-1]) or {}) if ids else {}

    def prune(self, keep_from: int) -> None:
        """Forget commits older than ``keep_from``; Spark will never replay them."""
        ids = self.batch_ids()
        for batch_id in ids[:-1]:   # the newest always stays: it carries the running state
            if batch_id < keep_from:
                os.remove(self._path("commit", batch_id))


# -- where decisions are recorded ---------------------------------------------------------
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


@dataclass
class StoreDecisions:
    """Decisions in the state store, each one a write fenced by the driver's attempt."""

    reporter: object       # runtime.reporter.AttemptReporter (kept loose: no store import here)
    pipeline_id: int
    plugin_id: str
    transaction_prefix: str    # this lineage's transaction ids start so (its batch number follows)

    def decided(self, batch_id: int, transaction_id: str) -> dict | None:
        found = self.reporter.decided_manifest(self.pipeline_id, self.plugin_id, transaction_id)
        return None if found is None else found[1]

    def decide(self, batch_id: int, transaction_id: str, manifest: dict) -> dict:
        return self.reporter.decide_batch(self.pipeline_id, self.plugin_id, batch_id, transaction_id, manifest)

    def published(self, batch_id: int, transaction_id: str) -> None:
        self.reporter.batch_published(self.pipeline_id, self.plugin_id, transaction_id)

    def unpublished(self) -> list[tuple[int, str, dict]]:
        return self.reporter.unpublished_manifests(self.pipeline_id, self.plugin_id, self.transaction_prefix)

    def fence(self) -> None:
        self.reporter.fence()

    def decide_once(self, key: str, plan: dict) -> dict:
        # Batch -1: no batch's; its key never starts like a lineage's, so no roll-forward lists it.
        return self.reporter.decide_batch(self.pipeline_id, self.plugin_id, -1, key, plan)


@dataclass
class FileDecisions:
    """Decisions as files next to the commit log: for a single process with no store (unit
    tests, tools). It fences nothing: only the store's decision stops a zombie driver."""

    log: SinkCommitLog

    def _path(self, batch_id: int) -> str:
        return os.path.join(self.log.root, "decided", f"{batch_id}.json")

    def _read(self, batch_id: int, transaction_id: str) -> dict | None:
        found = read_json(self._path(batch_id))
        return found if found is not None and found["transaction_id"] == transaction_id else None

    def decided(self, batch_id: int, transaction_id: str) -> dict | None:
        found = self._read(batch_id, transaction_id)
        return None if found is None else found["manifest"]

    def decide(self, batch_id: int, transaction_id: str, manifest: dict) -> dict:
        earlier = self.decided(batch_id, transaction_id)
        if earlier is not None:
            return earlier
        write_json_atomic(self._path(batch_id), {"transaction_id": transaction_id, "status": "DECIDED",
                                                 "manifest": manifest})
        return manifest

    def published(self, batch_id: int, transaction_id: str) -> None:
        found = self._read(batch_id, transaction_id)
        if found is not None and found["status"] == "DECIDED":
            write_json_atomic(self._path(batch_id), {**found, "status": "PUBLISHED"})

    def unpublished(self) -> list[tuple[int, str, dict]]:
        directory = os.path.dirname(self._path(0))
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return []
        found = []
        for batch_id in sorted(int(m.group(1)) for m in map(_BATCH_FILE.match, names) if m):
            entry = read_json(self._path(batch_id)) or {}
            if entry.get("status") == "DECIDED":
                found.append((batch_id, entry["transaction_id"], entry["manifest"]))
        return found

    def fence(self) -> None:
        pass

    def decide_once(self, key: str, plan: dict) -> dict:
        path = os.path.join(self.log.root, "decided", f"{key}.json")
        earlier = read_json(path)
        if earlier is not None:
            return earlier
        write_json_atomic(path, plan)
        return plan


# -- one batch ----------------------------------------------------------------------------
@dataclass
class BatchResult:
    batch_id: int
    state: dict
    replayed: bool     # True: decided by an earlier attempt (rolled forward if need be); nothing written


def write_exactly_once(writer: SinkWriter, log: SinkCommitLog, df, batch_id: int, transaction_id: str,
                       decisions: SinkDecisions | None = None, staging_tag: str = "",
                       save_modes_key: str | None = None) -> BatchResult:
    """Run one batch through a sink at most once, whatever crashed before (see the module doc).

    ``decisions`` records the commit decisions (the driver passes ``StoreDecisions``, fenced
    by its attempt); ``staging_tag`` names this attempt's own staging directory, so that a
    zombie's files and its replacement's never mix; ``save_modes_key`` names the sink's
    save-mode decision (default: one per lineage of transaction ids)."""
    decisions = decisions if decisions is not None else FileDecisions(log)
    done = log.committed(batch_id)
    if done is not None:
        return BatchResult(batch_id, done, replayed=True)
    decided = decisions.decided(batch_id, transaction_id)
    if decided is not None:
        return BatchResult(batch_id, publish(writer, log, decisions, batch_id, transaction_id, decided),
                           replayed=True)
    leftover = log.intent(batch_id)
    if leftover is not None:
        writer.abort_batch(batch_id, leftover)
    if save_modes_key is None:
        save_modes_key = "S_" + transaction_id.rsplit("_", 1)[0]
    batch = Batch(batch_id=batch_id, transaction_id=transaction_id,
                  previous_state=log.latest_state(before=batch_id), fence=decisions.fence,
                  staging_tag=staging_tag, decide_once=decisions.decide_once, save_modes_key=save_modes_key)
    if not writer.publishes_files:
        state = writer.write_batch(df, batch)      # commits in its own system
        decisions.fence()
        log.commit(batch_id, state)
        return BatchResult(batch_id, state, replayed=False)
    staged: StagedBatch = writer.stage_batch(df, batch)
    failpoints.hit("sink.before_decision")
    decided = decisions.decide(batch_id, transaction_id, {"publish": staged.publish, "state": staged.state})
    failpoints.hit("sink.after_decision")
    return BatchResult(batch_id, publish(writer, log, decisions, batch_id, transaction_id, decided), replayed=False)


def publish(writer: SinkWriter, log: SinkCommitLog, decisions: SinkDecisions, batch_id: int,
            transaction_id: str, manifest: dict) -> dict:
    """Publish a decided batch (again): idempotent, whoever decided it. Returns its state."""
    if log.committed(batch_id) is None:    # else only the mark was missing (a crash just before it)
        writer.publish(manifest["publish"])
        log.commit(batch_id, manifest["state"])
    decisions.published(batch_id, transaction_id)
    return manifest["state"]


def roll_forward(writer: SinkWriter, log: SinkCommitLog, decisions: SinkDecisions) -> list[int]:
    """At pipeline start: publish every batch decided but not yet published; returns their ids."""
    if not writer.publishes_files:
        return []
    done = []
    for batch_id, transaction_id, manifest in decisions.unpublished():
        publish(writer, log, decisions, batch_id, transaction_id, manifest)
        done.append(batch_id)
    return done
