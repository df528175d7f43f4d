"""RECREATE_SCHEMA on a Paimon table: planned as the table's identity (where it lives and when its
first schema was written), carried out as one rename of its directory onto a tombstone named by
that identity (``drop_if_same``), so a zombie that carries the decision out late never drops the
table its replacement created since; and the writers' side of the table's lock (``table_lock``),
which puts back a rename whose carrier died (``hold_for_writing``).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import time
from typing import Callable
from urllib.parse import urlparse

from seatide import failpoints
from seatide.connectors.paimon import commits, pending_batches
from seatide.connectors.paimon.table_lock import TableLock, remove, sync_dir
from seatide.connectors.paimon.table_setup import drop_user, identity
from seatide.connectors.paimon.warehouse import PaimonError, get_table

log = logging.getLogger(__name__)


def drop_if_same(catalog, database: str, name: str, plan: dict, fence: Callable[[], None],
                 owed: Callable[[Callable[[dict], bool]], bool] | None = None, on_time: bool = False) -> None:
    """Drop the table when it is still the decided one (``plan["recreate"]``); idempotent, and at
    most once per decided table. pypaimon drops whatever table has the name, so a check followed by
    a drop let a zombie that checked, then paused, drop the table its replacement had recreated
    since, with its committed batches. The drop is a rename of the table's directory onto a
    tombstone named by the decided identity, then of the tombstone to a name of its own, removed
    once the lock is let go (every writer waited for the removal before: outside review, L1).

    The decided table still there means the decision was never carried out: its decider died first.
    Carried out late, the drop would take every row committed since, by a fresh start (a scope of
    its own) that kept the table: ``owed(carried_out)`` (the door's, ``Target.destroy_owed``) is
    asked first, which skips it (False: a later decision of another scope emptied the table,
    ``carried_out`` says) or refuses it over kept rows (raises), and again once the table is renamed
    away: a batch decided in between is seen, the table is put back and nothing is destroyed. The
    door knows the job's own rows only: a snapshot committed since the decision (``plan["held"]``)
    by anyone else (another job, a writer outside SeaTide) refuses it too, as does a batch another
    job staged, marked deciding and has not committed yet (``pending_batches``: maybe decided in its
    store, its driver maybe gone; one never marked is removed) (``_nobody_since``). ``on_time``: this writer made the plan just now (a refusal's wording).

    The check, the rename, the second look and the put-back or drop happen holding the table's
    lock alone (``table_lock``), fenced: no writer stages or commits while the table is away
    (outside review, R-B), and two carriers of one decision carry it out once, the second finding
    it done (R-G). A carrier killed after its rename let the lock go with its process: whoever
    takes the lock next, a carrier or a writer of any scope, finds the table renamed away with no
    holder and puts it back (R-A): the decision is again one never carried out, asked again by the
    next carrier of its scope."""
    decided = plan["recreate"]
    path = _local(decided["path"])
    label = f"{database}.{name}"
    what = f"RECREATE_SCHEMA of {label}"
    with TableLock(path, True, what, fence):
        fence()
        put_back_interrupted(path, label)
        table = get_table(catalog, database, name)
        if table is None or identity(table) != decided:
            return
    carried_out = _CarriedOut(table)
    if owed is not None and not owed(carried_out):
        log.info("Paimon sink: %s: RECREATE_SCHEMA decided and never carried out is skipped: a later decision "
                 "emptied the table since", label)
        return
    failpoints.hit("paimon.before_drop")
    with TableLock(path, True, what, fence):
        fence()
        put_back_interrupted(path, label)
        table = get_table(catalog, database, name)
        if table is None or identity(table) != decided:
            return          # carried out by another carrier since the first look
        _nobody_since(table, plan, label, path, on_time)
        carried_out.frozen = True
        dropped = _rename_and_drop(path, _tombstone(path, decided["created"]), decided, label, carried_out, owed)
        _set_aside_of(path, held=True)      # the mark of the rename removed: dropped, or put back
    if dropped:
        _remove_dropped(path)
        log.info("Paimon sink: dropped table %s (RECREATE_SCHEMA)", label)


def _nobody_since(table, plan: dict, label: str, path: str, on_time: bool) -> None:
    """Refuse when a snapshot of ``table`` after the one it held when the decision was made
    (``plan["held"]``) was committed by anyone but the job's own writers (``plan["own"]``: their
    commit users' start, ``commits.of_job``), or another job has a batch staged, marked deciding and
    not committed (``pending_batches``; called holding the table's lock alone): the job's records say
    nothing of another writer's rows (outside review, H1; review 2, H1, H2)."""
    held, own = plan.get("held"), plan.get("own")
    manager = table.snapshot_manager()
    latest = commits.latest_id(table)
    why, way = None, ("submit the job again as a new job (it decides its save modes anew), or drop the table "
                      "yourself if the rows written since are not wanted")
    if not isinstance(held, int):
        why = "the decision was recorded by an earlier SeaTide, which did not record the table's snapshot then"
    else:
        for snapshot_id in range(held + 1, latest + 1):
            snapshot = manager.get_snapshot_by_id(snapshot_id)
            if snapshot is None:
                why = f"snapshot {snapshot_id} has expired, so who committed since cannot be told"
                break
            if not commits.of_job(snapshot.commit_user, own):
                why = (f"snapshot {snapshot_id} was committed since by {snapshot.commit_user!r}, which is not this "
                       "job (another job, or a writer outside SeaTide)")
                break
    if why is None:
        pending = pending_batches.blocking(path, table, own, plan["recreate"].get("created"))
        if pending:
            why = ("another job has staged a batch and not committed it yet, as far as the table's snapshots "
                   f"tell ({'; '.join(pending)}): its writer was deciding it, so it may be decided in that job's "
                   "records, and the drop would take its files")
            way = ("resume that job (or let its retry run) so it commits its batch, then submit this job again; "
                   "if its batch is in the table already, or that job is gone for good and its batch is not "
                   "wanted, remove the record named (a file in the table's .seatide-pending directory) and "
                   "submit again")
    if why is None:
        return
    when = ("decided just now, when the table's newest snapshot was {held}" if on_time else
            "decided when the table's newest snapshot was {held} and never carried out (the driver that decided "
            "it ended first, or another pipeline of the job decided it)").format(held=held)
    raise PaimonError(
        f"Paimon sink: table {label}: this job's RECREATE_SCHEMA, {when}, is refused: {why}, and carrying it out "
        f"now would drop their rows. Nothing was destroyed. The decision stands whatever the config says now. "
        f"Way on: {way}")


def _rename_and_drop(path: str, tombstone: str, decided: dict, label: str, carried_out, owed) -> bool:
    """The decided table renamed onto its tombstone, asked again, then dropped (True) or put back;
    holding the lock. Dropped is the tombstone renamed out of the tombstones' names (``_DROPPED_AS``):
    never seen as a table renamed away again, its files removed once the lock is let go."""
    _mark_renaming(path)
    try:
        os.rename(path, tombstone)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST):
            return False    # no table there, or its tombstone is taken: dropped before
        raise
    failpoints.hit("paimon.renamed")
    if _created(tombstone) != decided["created"]:
        _put_back(tombstone, path, label)   # not the decided table (one made outside SeaTide since the check)
        return False
    try:
        still = owed is None or owed(carried_out)
    except BaseException:
        _put_back(tombstone, path, label)
        raise
    if not still:
        _put_back(tombstone, path, label)
        return False
    os.rename(tombstone, _beside(path, f"{_DROPPED_AS}{decided['created']}-{os.getpid()}-{time.time_ns()}"))
    return True


def _mark_renaming(path: str) -> None:
    """The table's mark that a carrier renames it away, durable before the rename: whoever holds the
    lock next looks for the tombstone (``_set_aside_of``)."""
    with open(_beside(path, _RENAMING), "w") as f:
        os.fsync(f.fileno())
    sync_dir(os.path.dirname(path))


def _remove_dropped(path: str) -> None:
    """Remove the dropped tables of ``path`` (this drop's, and any a carrier killed before removing left),
    not holding the lock: nobody reads them."""
    parent, prefix = os.path.dirname(path), f".{os.path.basename(path)}."
    for entry in os.listdir(parent) if os.path.isdir(parent) else []:
        dropped = os.path.join(parent, entry)
        old = entry.startswith(prefix + "recreated-") and os.path.exists(os.path.join(dropped, _DROPPED))
        if old or entry.startswith(prefix + _DROPPED_AS):
            shutil.rmtree(dropped, ignore_errors=True)


def hold_for_writing(table_path: str, label: str, what: str, cancelled: Callable[[], None] = lambda: None) -> TableLock:
    """The table's lock held shared, for a writer. A table renamed away seen under it has no carrier
    (the carrier holds the lock alone until it puts the table back or drops it): its carrier died,
    and the writer puts it back, holding the lock alone, before it writes (outside review, R-A)."""
    while True:
        hold = TableLock(table_path, False, what, cancelled)
        if not _set_aside_of(table_path, held=True):
            return hold
        hold.release()
        with TableLock(table_path, True, what, cancelled):
            put_back_interrupted(table_path, label)


def renamed_away(path: str) -> bool:
    """A RECREATE_SCHEMA has the table of ``path`` renamed away: asking whether it may drop it, or its carrier died."""
    return bool(_set_aside_of(path))


def moved_aside(path: str) -> list[str]:
    """Where a RECREATE_SCHEMA renamed the table of ``path`` away to and has not dropped it nor put it
    back (its carrier asking whether it may drop it, or dead); a look that changes nothing."""
    return _set_aside_of(path)


def put_back_interrupted(path: str, label: str) -> None:
    """Put back the table a RECREATE_SCHEMA renamed away from ``path`` and whose carrier died before
    it dropped it or put it back; holding the table's lock alone."""
    for tombstone in _set_aside_of(path, held=True):
        log.warning("Paimon sink: %s: a RECREATE_SCHEMA renamed the table to %s and its driver died before it "
                    "asked again; the table is put back (the decision, never carried out, is asked again by the "
                    "next attempt of its job)", label, tombstone)
        _put_back(tombstone, path, label)
    _set_aside_of(path, held=True)      # none left: the mark removed


_DROPPED = "dropped-by-seatide"    # an earlier SeaTide's marker: its tombstone holds a dropped table
_DROPPED_AS = "dropped-"           # a dropped table's name until it is removed: .<table>.dropped-<created>-...
_RENAMING = "seatide-renamed-away"  # .<table>.seatide-renamed-away: a carrier renames the table away (durably first)


def _beside(path: str, what: str) -> str:
    return os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{what}")


def _tombstone(path: str, created) -> str:
    """Where RECREATE_SCHEMA renames the table of ``path`` first written at ``created``."""
    return _beside(path, f"recreated-{created}")


def _set_aside_of(path: str, held: bool = False) -> list[str]:
    """The tombstones of ``path`` holding a table not dropped yet: renamed away, their second look not
    done. Looked for only when the table's mark (``_RENAMING``) says a carrier renamed or is renaming
    it: every batch's hold asks, and listing the database directory each time was quadratic in its
    tables (outside review 2, M1). ``held``: the caller holds the lock, so no carrier is between its
    mark and its rename, and a mark with no tombstone (a carrier killed in between) is removed."""
    mark = _beside(path, _RENAMING)
    if not os.path.exists(mark):
        return []
    prefix = f".{os.path.basename(path)}.recreated-"
    parent = os.path.dirname(path)
    entries = sorted(os.listdir(parent)) if os.path.isdir(parent) else []
    found = [os.path.join(parent, e) for e in entries if e.startswith(prefix)
             and os.path.isdir(os.path.join(parent, e)) and not os.path.exists(os.path.join(parent, e, _DROPPED))]
    if held and not found:
        remove(mark)
    return found


def _put_back(tombstone: str, path: str, label: str) -> None:
    """The table renamed to ``tombstone`` back to ``path``; refused, with how to restore it, when a
    table was made there since (its rows and the tombstone's are both committed)."""
    try:
        os.rename(tombstone, path)
    except OSError as exc:
        raise PaimonError(
            f"Paimon sink: table {label}: a RECREATE_SCHEMA carried out late renamed it to {tombstone} and was "
            f"refused (or its driver died before it looked again), but a table was made at {path} since, outside "
            f"SeaTide, so it cannot be put back ({exc.strerror}). Nothing was deleted: the rows committed before "
            f"are in {tombstone}. Restore them: stop the jobs writing {label}, move {path} aside, rename "
            f"{tombstone} to {path}, then write the moved table's rows into it again (or drop them if "
            "unwanted)") from None


def table_dir(catalog, database: str, name: str) -> str:
    """The local directory of the table ``database.name`` (whether it exists or not)."""
    from pypaimon.common.identifier import Identifier

    return _local(catalog.get_table_path(Identifier.from_string(f"{database}.{name}")))


def _local(path: str) -> str:
    return urlparse(path).path if "://" in path or path.startswith("file:") else path


def _created(table_dir_: str) -> int | None:
    """When the first schema of the table in ``table_dir_`` was written (None: no table there)."""
    try:
        with open(os.path.join(table_dir_, "schema", "schema-0")) as f:
            return json.load(f).get("timeMillis")
    except (OSError, ValueError):
        return None


class _CarriedOut:
    """Whether a later save-mode plan of a table's target (``owed_destroy.later_destroys``) was carried
    out on it: a RECREATE_SCHEMA's decided table is not this one (it was dropped), a DROP_DATA's
    commit is in its snapshots. Looked at while the table is in place; once it is renamed away
    (``frozen``) a plan not looked at counts as not carried out (refusing wrongly costs a new job,
    skipping wrongly loses rows)."""

    def __init__(self, table):
        self.table, self.answers, self.frozen = table, {}, False

    def __call__(self, plan: dict) -> bool:
        key = json.dumps(plan, sort_keys=True, default=str)
        if key not in self.answers and not self.frozen:
            if "recreate" in plan:
                self.answers[key] = plan["recreate"] != identity(self.table)
            elif isinstance(plan.get("drop_data"), int):
                sid = plan["drop_data"]
                self.answers[key] = commits.committed(self.table, drop_user(self.table, sid), sid, sid) is not None
        return self.answers.get(key, False)


__all__ = ["drop_if_same", "hold_for_writing", "moved_aside", "put_back_interrupted", "renamed_away", "table_dir"]
