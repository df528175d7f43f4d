"""A pipeline's directory must not be older than what its sinks decided (outside reviews 1 and 2).

A batch's decision (its sink's manifest in the store, ``runtime/commit_log.py``) is made before the
store's checkpoint row for it, and a batch replayed under a decided transaction id writes nothing.
What makes a replay the same batch is in the directory: its lineage (``seatide.json``, in every
transaction id, ``T_<run>_<pipeline>_<sink>_<lineage>_<batch>``) and Spark's plan of the batch
(``offsets/N``: where it ends in each source). A directory put back from a backup, or lost and made
again, that lacks either is older than the sinks' output, and cannot go on exactly once:

* no ``seatide.json``: a new lineage, whose batches no decision knows; every decided batch is
  written again (review 1);
* the lineage, but not Spark's plan of the newest decided batch N (a backup taken before N was
  planned: after the directory's preparation, or at an older checkpoint): Spark plans N again, maybe
  with other boundaries (the input grew, ``micro-batch.max-rows`` changed), and the sinks skip the
  new batch N as decided: rows lost, or written twice (review 2, F1). Only a checkpointed pipeline
  (micro-batches) has such a plan; a plain batch runs its one batch whole;
* another lineage than the one that decided last (a backup from before a ``--fallback fresh``, or
  a savepoint's copy made again after its branch had decided: review 2, F2 and F4): that lineage
  carries on with batches another already wrote;
* the lineage that decided last, but a later fresh start (which decided nothing) emptied its
  targets with a destructive save mode: its committed rows are gone (``store/dropped_output.py``).

The decisions that count are those since the directory was made: since the move that made it (a
fresh start's, or a savepoint's copy: an explicit new start, ``store/runs.py``'s mark), else since
the run began. Refusing is the only safe answer: going on from the decided batch needs the source
positions it ended at, which were only in the lost directory's Spark log.

A sink that commits in its own system (Jdbc, Redis, Http: ``decided_in_store`` False) decides
nothing in the store: the driver records each batch's start before its first sink write instead
(``store/batch_starts.py``, outside review 3), and a batch begun counts here as a decided one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sqlalchemy import and_, func, select

from seatide.store import schema as s
from seatide.store.batch_mode import mode_change, ran_in_micro_batches
from seatide.store.batch_starts import newest_start
from seatide.store.checkpoint_metadata import checkpoint_metadata
from seatide.store.dropped_output import Dropped, dropped_after, dropped_output
from seatide.store.runs import PREPARED_MARK, read_move, read_prepared, spark_checkpoint_dir


@dataclass(frozen=True)
class Decided:
    """What a pipeline's sinks committed since its directory was made."""
    batch: int                  # the newest batch of ``lineage`` any sink decided (or checkpointed)
    lineage: str | None         # None: known from checkpoint rows only, or transaction ids that name none
    checkpointed: int | None = None     # the newest checkpoint row's batch, whatever its sinks
    micro_batch: bool = True            # the pipeline runs checkpointed: its batches are planned in Spark's log
    # ``batch`` is only begun (a start record beyond every decision and checkpoint row): a sink that
    # commits in its own system may or may not have committed it, and a refusal must not say it did
    begun: bool = False
    # How the incarnation that decided last ran (its env, the jobs row until a resume writes its
    # own), None: an earlier one decided it (store/batch_mode.py)
    ran_micro: bool | None = None
    # A fresh start after ``lineage``'s batches whose save modes emptied a target (store/dropped_output.py)
    dropped: Dropped | None = None


def _lineage(transaction_id: str) -> str | None:
    parts = transaction_id.rsplit("_", 2)
    return parts[1] if transaction_id.startswith("T_") and len(parts) == 3 and parts[2].isdigit() else None


def _made_by(directory: str, first_incarnation: int, incarnation: int) -> int:
    """The incarnation whose move (a fresh start or a savepoint's copy) made ``directory``, else the run's first."""
    try:
        move = read_move(directory)
    except (OSError, ValueError):
        move = None        # no evidence: every decision of the run counts
    made = move[0] if move is not None and isinstance(move[0], int) else None
    return made if made is not None and first_incarnation <= made <= incarnation else first_incarnation


def newest_decided(conn, job, pipeline_id: int, directory: str, first_incarnation: int,
                   micro_batch: bool) -> Decided | None:
    """What the pipeline's sinks decided last since ``directory`` was made, or None (``micro_batch``:
    the pipeline runs checkpointed, as the job's config now says)."""
    made = _made_by(directory, first_incarnation, job.incarnation)
    m = s.sink_manifests.c
    since = and_(m.job_id == job.job_id, m.pipeline_id == pipeline_id, m.batch_id >= 0,      # -1: a save mode's
                 m.incarnation >= made)
    # Attempts only follow one another, and one attempt runs one lineage of a pipeline: the last
    # attempt's decision names the lineage that decided last (a zombie's is fenced, never written).
    last = conn.execute(select(m.transaction_id, m.incarnation).where(since).order_by(
        m.incarnation.desc(), m.attempt_id.desc(), m.decided_at.desc()).limit(1)).first()
    # A sink that commits in its own system (Jdbc, Redis, Http) decides nothing here, but its batches
    # reach checkpoint rows: the directory must hold Spark's plan of the newest of them too.
    c = s.checkpoints.c
    checkpointed = conn.execute(select(func.max(c.batch_id)).where(and_(
        c.job_id == job.job_id, c.pipeline_id == pipeline_id, c.kind == "CHECKPOINT", c.status == "COMPLETED",
        c.incarnation >= made))).scalar()
    # A batch the driver began counts as decided: a sink that commits in its own system (Jdbc, Redis,
    # Http) may have committed it there. Its start precedes every decision of its incarnation.
    started = newest_start(conn, job.job_id, pipeline_id, made)
    ran = _ran_micro(conn, job, pipeline_id, made, last, started)
    if started is not None and (last is None or started.incarnation >= last.incarnation):
        decided = _newest_of(conn, since, started.lineage)
        known = max(-1 if decided is None else decided, -1 if checkpointed is None else checkpointed)
        return Decided(max(started.batch, known), started.lineage, checkpointed, micro_batch,
                       begun=started.batch > known, ran_micro=ran,
                       dropped=dropped_after(conn, job.job_id, pipeline_id, started.lineage,
                                             max(made, started.incarnation), directory))
    if last is None:
        return None if checkpointed is None else Decided(checkpointed, None, checkpointed, micro_batch, ran_micro=ran)
    lineage = _lineage(last.transaction_id)
    dropped = None if lineage is None else dropped_after(conn, job.job_id, pipeline_id, lineage,
                                                         max(made, last.incarnation), directory)
    return Decided(_newest_of(conn, since, lineage), lineage, checkpointed, micro_batch, ran_micro=ran,
                   dropped=dropped)


def _ran_micro(conn, job, pipeline_id: int, made: int, last, started) -> bool | None:
    """How the batches were made, if the job's current incarnation (whose env the jobs row holds)
    decided, began or checkpointed the newest of them; None when an earlier one did."""
    c = s.checkpoints.c
    newest = max([r.incarnation for r in (last, started) if r is not None] + [conn.execute(
        select(func.max(c.incarnation)).where(and_(c.job_id == job.job_id, c.pipeline_id == pipeline_id,
                                                   c.kind == "CHECKPOINT", c.incarnation >= made))).scalar() or -1])
    return job.mode == "STREAMING" or job.checkpoint_interval_ms is not None if newest == job.incarnation else None


def _newest_of(conn, since, lineage: str | None) -> int | None:
    """The newest batch decided under ``lineage`` (None: any) among the decisions ``since`` selects."""
    m = s.sink_manifests.c
    ours = since if lineage is None else and_(since, m.transaction_id.like(f"T\\_%\\_{lineage}\\_%", escape="\\"))
    return conn.execute(select(func.max(m.batch_id)).where(ours)).scalar()


def decided_in_place(conn, job, pipelines: dict, first_incarnation: int, micro_batch: bool) -> dict[int, Decided]:
    """{pipeline id: its newest decision} of the pipelines (rows with a ``checkpoint_dir``)."""
    found = {pid: newest_decided(conn, job, pid, row.checkpoint_dir, first_incarnation, micro_batch)
             for pid, row in pipelines.items()}
    return {pid: decided for pid, decided in found.items() if decided is not None}


def _planned_up_to(directory: str) -> int | None:
    """The newest batch Spark planned in the directory's current Spark checkpoint (``offsets/N``);
    raises ``ValueError`` naming the move's mark when it is unreadable (it says which one is current)."""
    try:
        mark = read_prepared(directory)
    except (OSError, ValueError) as exc:
        raise ValueError(f"its checkpoint move's mark {directory}/{PREPARED_MARK} is unreadable ({exc})") from exc
    since = None if mark is None else mark.get("attempt")        # spark_checkpoint.claim's rule
    try:
        names = os.listdir(os.path.join(spark_checkpoint_dir(directory, since=since), "offsets"))
    except OSError:
        return None
    batches = [int(n) for n in names if n.isdigit()]
    return max(batches) if batches else None


def _metadata(directory: str) -> dict:
    try:
        meta = checkpoint_metadata(directory)
    except ValueError as exc:
        raise ValueError(f"its metadata {exc}") from None
    if meta is None:        # gone since lost_lineage looked
        raise ValueError(f"its metadata {os.path.join(directory, 'seatide.json')} is missing")
    return meta


def _put_back(decided: Decided, batch: int) -> str:
    if decided.begun and batch == decided.batch:
        return f"Put back a newer backup of the directory, one that holds Spark's plan of batch {batch} (offsets/{batch})"
    return f"Put back a newer backup of the directory, one taken after batch {batch} was committed"


def _committed(decided: Decided, batch: int) -> str:
    """What the sinks did with ``batch``, as far as the store knows."""
    if decided.begun and batch == decided.batch:
        return f"its sinks began batch {batch} (a sink that commits in its own system may have committed it)"
    return f"its sinks committed batch {batch}"


def _planned_in_micro_batches(directory: str, micro_batch: bool) -> str | None:
    """Why a pipeline whose sinks decided nothing the store knows cannot go on plain from a directory
    holding Spark's plan: a sink that commits in its own system may have committed a batch of it
    before any record (a checkpoint written before start records, review 5, F2)."""
    try:
        meta, planned = checkpoint_metadata(directory), _planned_up_to(directory)
    except ValueError:
        return None         # named by the resume's and the driver's own checks of the metadata
    if micro_batch or meta is None or planned is None or not ran_in_micro_batches(meta, planned):
        return None
    return mode_change(True, planned, planned_only=True)


def _other_mode(meta: dict, planned: int | None, decided: Decided, batch: int) -> bool | None:
    """The mode the batches up to ``batch`` ran in, when it is not the new one. The directory's record
    tells (its driver wrote it once this check passed); a directory of an older release without
    Spark's plan does not, and the store does (review 5, F1 and F3): a batch above 0 (a plain run
    has batch 0 only), else the env of the incarnation that decided last."""
    ran = ran_in_micro_batches(meta, planned)
    if ran is None:
        ran = True if batch > 0 else decided.ran_micro
    return ran if ran is not None and ran != decided.micro_batch else None


def lost_lineage(directory: str, decided: Decided | None, micro_batch: bool | None = None) -> str | None:
    """Why the pipeline cannot go on from ``directory`` when its sinks decided ``decided``, or None
    (``micro_batch``: the new mode, which ``decided`` carries when there is one)."""
    if decided is None:
        return None if micro_batch is None else _planned_in_micro_batches(directory, micro_batch)
    batch = max(decided.batch, decided.checkpointed if decided.checkpointed is not None else -1)
    if not os.path.isfile(os.path.join(directory, "seatide.json")):
        what = "is missing" if not os.path.isdir(directory) else "holds no SeaTide checkpoint (seatide.json is missing)"
        unrecorded = ", which no checkpoint records yet," if decided.checkpointed is None or \
            decided.checkpointed < decided.batch else ""
        return (f"{_committed(decided, batch)}{unrecorded} but its checkpoint directory "
                f"{directory} {what} (a backup from before it was put back?): started from there, the pipeline "
                f"would begin a new lineage, and batch {batch} and every batch before it would be written to its "
                f"sinks again. " + _put_back(decided, batch))
    try:
        meta, planned = _metadata(directory), _planned_up_to(directory)
    except ValueError as exc:
        return (f"{_committed(decided, batch)}, but {exc}: which lineage and which of Spark's plans it holds "
                "cannot be told. Put back a readable copy of that file (or resume with the job's original config)")
    lineage = meta.get("lineage")
    if decided.lineage is not None and lineage != decided.lineage:
        return (f"its checkpoint directory {directory} holds lineage {lineage}, but its sinks last committed "
                f"batches under lineage {decided.lineage} (up to batch {decided.batch}) since that directory was "
                f"made: "
                f"it is a backup from before them (before a fresh start, or of a savepoint's copy made again), "
                f"and going on from it would write batches to its sinks again. " + _put_back(decided, batch))
    if decided.dropped is not None:
        return dropped_output(directory, lineage, decided.batch, decided.dropped)
    ran_micro = _other_mode(meta, planned, decided, batch)
    if ran_micro is not None:
        return mode_change(ran_micro, batch)          # store/batch_mode.py
    if decided.micro_batch and (planned is None or planned < batch):
        held = "no batch" if planned is None else f"batches up to {planned} only"
        return (f"{_committed(decided, batch)}, but its checkpoint directory {directory} holds Spark's plan "
                f"of {held} (offsets/{batch} is missing: a backup taken before batch {batch} was planned): "
                f"planned again, batch {batch} may hold other rows than the ones committed (new input, "
                f"another micro-batch.max-rows), which would be lost or written twice. "
                + _put_back(decided, batch))
    return None
