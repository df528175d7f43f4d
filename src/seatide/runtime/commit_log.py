"""Where a sink's batches are recorded: the decisions in the store and the local commit log.

The protocol that uses them lives in ``seatide.plugin.sink_protocol`` (stage, decide, publish,
roll forward; the save-mode door). Here:

* ``StoreDecisions``: a batch's commit decision is ONE store write of its manifest
  (``AttemptReporter.decide_batch``), fenced by the driver's attempt, so a zombie driver decides
  nothing and therefore publishes nothing; the first decision stands. A save mode's decision
  (``decide_once``) is the same kind of write, under a key that is no batch's.
* ``FileDecisions``: the same as files next to the commit log, for a single process with no
  store (unit tests, tools); it fences nothing.
* ``SinkCommitLog``, under the pipeline's checkpoint directory: the state after each published
  batch, a mirror of the decisions for a fast replay and the sink's running totals::

    sinks/<plugin_id>/commit/<batch>.json      the state after a published batch, marked with the
                                               checkpoint's lineage (see ``SinkCommitLog``)
    sinks/<plugin_id>/applying/<batch>.json    the targets a sink that commits in its target's own
                                               system (Jdbc) is about to commit the batch into, written
                                               before that commit, removed with the batch's mark
    sinks/<plugin_id>/intent/<batch>.json      (written by SeaTide before the decision existed:
                                               a replay undoes what it lists)
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass

from seatide.plugin.base import PermanentError
from seatide.plugin.save_mode_door import decision_name
from seatide.plugin.sink_protocol import BatchResult, SaveModeDoor, SinkRun, SinkTargets
from seatide.plugin.sink_records import SinkDecisions
from seatide.store.kept_output import kept_output
from seatide.store.owed_destroy import later_destroys, refusal as late_refusal
from seatide.store.own_output import wrote_before

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


_LINEAGE = "seatide.lineage"     # a commit mark's branch of the checkpoint (absent: written before marks had one)


@dataclass
class SinkCommitLog:
    """A sink's commit marks, read and written for one lineage (branch) of the pipeline's checkpoint.

    A driver holds its checkpoint directory by path. A resume may put a savepoint's copy (a new
    lineage) or an empty directory at that path while a replaced driver of the old incarnation is
    frozen between its batch's decision and its publish; when it thaws it writes its mark into the
    new branch's directory (review 30, F3). The new branch plans that batch number again, with
    other rows maybe: a mark of another lineage is therefore no mark of this log. The marks a
    savepoint's copy brings are its branch's own (``adopt_marks`` restamps them at the branch).
    ``lineage`` None (a tool, a test with no checkpoint): every mark counts."""

    root: str   # <checkpoint dir>/sinks/<plugin_id>
    lineage: str | None = None

    def _path(self, area: str, batch_id: int) -> str:
        return os.path.join(self.root, area, f"{batch_id}.json")

    def committed(self, batch_id: int) -> dict | None:
        return self._ours(read_json(self._path("commit", batch_id)))

    def _ours(self, mark: dict | None) -> dict | None:
        if mark is None or _LINEAGE not in mark:
            return mark         # none, or one written before marks carried their lineage: the branch's
        if self.lineage is not None and mark[_LINEAGE] != self.lineage:
            return None
        return mark["state"]

    def intent(self, batch_id: int) -> dict | None:
        """What an older SeaTide published before its commit (it wrote intents; this one does not)."""
        return read_json(self._path("intent", batch_id))

    def applying(self, batch_id: int, targets: list[str]) -> None:
        """Before the batch commits in its targets' own system (rows and their record in one database
        transaction), the targets it commits into: from that commit until the mark, rows are there that
        no mark names yet, and a fresh start's destructive save mode must see them
        (``store/kept_output.py``; outside review 8, G: a DROP_DATA in that window took them)."""
        write_json_atomic(self._path("applying", batch_id), {_LINEAGE: self.lineage, "targets": sorted(targets)})

    def commit(self, batch_id: int, state: dict) -> None:
        mark = state if self.lineage is None else {_LINEAGE: self.lineage, "state": state}
        write_json_atomic(self._path("commit", batch_id), mark)
        for area in ("applying", "intent"):     # the mark names the targets now
            try:
                os.remove(self._path(area, batch_id))
            except FileNotFoundError:
                pass

    def batch_ids(self) -> list[int]:
        """Every batch with a mark, this lineage's or not."""
        try:
            names = os.listdir(os.path.join(self.root, "commit"))
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for m in map(_BATCH_FILE.match, names) if m)

    def _newest(self, before: int | None = None) -> tuple[int, dict] | None:
        for batch_id in reversed([b for b in self.batch_ids() if before is None or b < before]):
            state = self.committed(batch_id)
            if state is not None:
                return batch_id, state
        return None

    def latest_state(self, before: int | None = None) -> dict:
        """State of this lineage's newest committed batch (older than ``before`` when given)."""
        newest = self._newest(before)
        return {} if newest is None else newest[1]

    def prune(self, keep_from: int) -> None:
        """Forget commits older than ``keep_from``; Spark will never replay them."""
        newest = self._newest()
        for batch_id in self.batch_ids():
            # this lineage's newest always stays: it carries the running state
            if batch_id < keep_from and (newest is None or batch_id != newest[0]):
                os.remove(self._path("commit", batch_id))
        try:
            applying = os.listdir(os.path.join(self.root, "applying"))
        except FileNotFoundError:
            applying = []
        for m in filter(None, map(_BATCH_FILE.match, applying)):
            if int(m.group(1)) < keep_from:       # a batch Spark never runs again: a mark names its targets
                os.remove(self._path("applying", int(m.group(1))))


def adopt_marks(checkpoint_dir: str, old_lineage: str | None, new_lineage: str) -> None:
    """A savepoint's copy branched to ``new_lineage``: the commit marks it brings of the lineage it
    was taken from are the new branch's (their batches are behind the savepoint); a mark of any
    other lineage (a replaced driver's, written into the directory before) stays another's."""
    root = os.path.join(checkpoint_dir, "sinks")
    for sink in os.listdir(root) if os.path.isdir(root) else []:
        commits = os.path.join(root, sink, "commit")
        for name in os.listdir(commits) if os.path.isdir(commits) else []:
            if not _BATCH_FILE.match(name):
                continue
            mark = read_json(os.path.join(commits, name))
            if mark is not None and mark.get(_LINEAGE, old_lineage) == old_lineage:
                state = mark["state"] if _LINEAGE in mark else mark
                write_json_atomic(os.path.join(commits, name), {_LINEAGE: new_lineage, "state": state})


# -- where decisions are recorded ---------------------------------------------------------
@dataclass
class StoreDecisions:
    """Decisions in the state store, each one a write fenced by the driver's attempt."""

    reporter: object       # runtime.reporter.AttemptReporter (kept loose: no store import here)
    pipeline_id: int
    plugin_id: str
    transaction_prefix: str    # this lineage's transaction ids start so (its batch number follows)
    # Who decides a save mode, kept in its record ({"pipeline", "lineage"}): a backup of an older
    # lineage whose output it destroyed is refused by it (store/dropped_output.py)
    writer: dict | None = None
    # A pipeline a fresh start began (the resume of incarnation ``began``), its save modes under that
    # fresh start's scope: the run's scope, whose standing decision it follows where it wrote nothing
    # before (store/own_output.py)
    run_scope: str = ""
    began: int | None = None

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
        if plan.get("destroy") is not None:
            # a target whose plan destroys nothing until decided (files) is asked here only; rows
            # kept since the door asked (Jdbc) are refused here too
            standing = self.may_destroy(key, str(plan.get("target")), plan.get("earlier") or [])
            if standing is not None:
                # Rows are kept there now: a decision that stands (the same plan, recorded by a writer of
                # this scope that died before carrying it out) is no license to carry this plan out over
                # them (outside review of G's fix, F2); the caller follows it through the door instead
                return {**standing, "kept": True}
        # Batch -1: no batch's; its key never starts like a lineage's, so no roll-forward lists it.
        return self.reporter.decide_batch(self.pipeline_id, self.plugin_id, -1, key, {**plan, **(self.writer or {})})

    def may_destroy(self, key: str, target: str, earlier_keys: list[str]) -> dict | None:
        if not self.writer:
            return None
        # Never over rows a pipeline that is not started over committed, which nothing would write
        # again (store/kept_output.py); permanent, as no retry changes it. A decision another writer
        # made meanwhile stands instead. ``earlier_keys``: the target's older spellings, which older
        # marks and decisions name
        kept = self.reporter.read(lambda conn: kept_output(conn, self.reporter.job_id, self.writer["pipeline"],
                                                           target, earlier_keys))
        if kept is None:
            return None
        earlier = self.recorded_once(key) or self._run_decision([target, *earlier_keys])
        if earlier is not None:
            return earlier
        raise PermanentError(f"pipeline {self.writer['pipeline']}: {kept}")

    def _run_decision(self, identities: list[str]) -> dict | None:
        """The run's decision of the target (``identities``: its key and earlier spellings, any of which
        may name it: outside review of review 8's fixes, F1), when this pipeline, started over, has
        nothing of its own there to destroy: it never began a batch before its fresh start
        (store/own_output.py)."""
        if self.began is None or not self.run_scope:
            return None
        pipeline, began = self.writer["pipeline"], self.began
        if self.reporter.read(lambda conn: wrote_before(conn, self.reporter.job_id, pipeline, began)):
            return None
        names = (decision_name(self.run_scope, identity) for identity in identities)
        return next(filter(None, map(self.recorded_once, names)), None)

    def owes_destroy(self, key: str, target: str, earlier_keys: list[str],
                     carried_out: Callable[[dict], bool] = lambda plan: False) -> bool:
        if not self.writer:
            return True
        job_id, pipeline = self.reporter.job_id, self.writer["pipeline"]

        def look(conn):
            return (later_destroys(conn, job_id, key, [target, *earlier_keys]),
                    kept_output(conn, job_id, pipeline, target, earlier_keys))

        later, kept = self.reporter.read(look)
        if any(map(carried_out, later)):
            return False        # emptied since by a later decision, carried out: nothing of this one is owed
        if kept is None:
            return True
        raise PermanentError(late_refusal(pipeline, target, kept))

    def recorded_once(self, key: str) -> dict | None:
        return self.decided(-1, key)


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
        earlier = self.recorded_once(key)
        if earlier is not None:
            return earlier
        write_json_atomic(os.path.join(self.log.root, "decided", f"{key}.json"), plan)
        return plan

    def may_destroy(self, key: str, target: str, earlier_keys: list[str]) -> dict | None:
        return None     # no store: no other pipeline's rows are known here

    def owes_destroy(self, key: str, target: str, earlier_keys: list[str], carried_out=None) -> bool:
        return True     # one scope, no other lineage's rows known here

    def recorded_once(self, key: str) -> dict | None:
        return read_json(os.path.join(self.log.root, "decided", f"{key}.json"))


# -- a sink's targets outside a job (tests, tools, benchmarks) -------------------------------
def write_exactly_once(targets: SinkTargets, log: SinkCommitLog, df, batch_id: int, transaction_id: str,
                       decisions: SinkDecisions | None = None, staging_tag: str = "",
                       save_modes_key: str | None = None) -> BatchResult:
    """One batch of a sink's targets (``plugin.sink_protocol.open_sink``) through the protocol's
    driver, at most once whatever crashed before. ``decisions`` records the commit decisions
    (default: files beside ``log``); ``save_modes_key`` names the run's save-mode decisions
    (default: one per lineage of transaction ids)."""
    if save_modes_key is None:
        save_modes_key = "S_" + transaction_id.rsplit("_", 1)[0]
    return _run(targets, log, decisions, staging_tag, save_modes_key).write(df, batch_id, transaction_id)


def roll_forward(targets: SinkTargets, log: SinkCommitLog, decisions: SinkDecisions) -> list[int]:
    """At pipeline start: publish every batch a sink's targets decided but did not publish."""
    return _run(targets, log, decisions, "", "").roll_forward()


def _run(targets: SinkTargets, log: SinkCommitLog, decisions: SinkDecisions | None, staging_tag: str,
         save_modes_key: str) -> SinkRun:
    decisions = decisions if decisions is not None else FileDecisions(log)
    # the run's own scope for its targets' save modes: Jdbc keeps the record that it carried them
    # out in the target database, where every run (each test, each tool) would otherwise find one another's
    return SinkRun(targets, log, decisions, SaveModeDoor(decisions, save_modes_key), transaction_prefix="",
                   staging_tag=staging_tag, save_modes_key=save_modes_key)
