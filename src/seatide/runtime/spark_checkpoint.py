"""Each attempt's own Spark checkpoint: no two drivers ever write one (issue 30, finding 22).

A driver replaced while it lives on (its host frozen and thawed, a store restart that freed
its worker's lock: it runs until its heartbeat finds it fenced, up to its self-fence) cannot
commit a batch, since every decision is fenced. But its Spark query still writes the
checkpoint's logs. Shared with the replacement, a batch planned (``offsets/K``) or a commit
recorded (``commits/K``) by the zombie before the replacement's own makes Spark stop the
replacement's query ("Concurrent update to the ... log. Multiple streaming jobs detected"):
a retry charged to the job for a zombie's doing (tests/runtime/test_spark_checkpoint.py).

So each attempt runs its query in ``<pipeline>/spark.attempt-<attempt id>``, made when it
starts from the pipeline's current checkpoint (``store.runs.spark_checkpoint_dir``: the highest
attempt id's, else a plain ``spark`` restored from a savepoint or left by an older layout).
Spark writes each file of a checkpoint once, through a new file renamed into place, and
never changes one: so the new directory is a tree of hard links to the current one, no data
copied. A zombie's later writes land in its own directory, which no one reads again; a driver
that finds a newer attempt's directory is the zombie itself and stops. Older directories are
removed once the new one is in place. ``spark`` is kept as a link to the current one, for
people and tools; SeaTide reads ``spark_checkpoint_dir``.
"""

from __future__ import annotations

import logging
import os
import shutil

from seatide.store.db import AttemptFenced
from seatide.store.runs import (SPARK_ATTEMPT_PREFIX, SPARK_DIR, read_prepared, spark_attempt,
                               spark_checkpoint_dir)

log = logging.getLogger(__name__)

_STAGING = "spark.staging-"
_SPARKS_TEMPORARY = ".tmp"     # Spark's file being written, before its rename into place


def claim(pipeline_directory: str, attempt_id: int) -> str:
    """This attempt's Spark checkpoint directory, made from the current one; raises
    ``AttemptFenced`` when a newer attempt already has one."""
    mine = os.path.join(pipeline_directory, f"{SPARK_ATTEMPT_PREFIX}{attempt_id}")
    current = spark_checkpoint_dir(pipeline_directory, since=_moved_by(pipeline_directory))
    newest = spark_attempt(os.path.basename(current))
    if newest is not None and newest > attempt_id:
        raise AttemptFenced(f"attempt {newest} runs the checkpoint in {pipeline_directory}: attempt "
                            f"{attempt_id} was replaced")
    if current != mine:
        staging = os.path.join(pipeline_directory, f"{_STAGING}{attempt_id}")
        shutil.rmtree(staging, ignore_errors=True)
        if os.path.isdir(current):
            _link_tree(current, staging)
        else:
            os.makedirs(staging)
        os.rename(staging, mine)
    _point_at(pipeline_directory, mine)
    _remove_older(pipeline_directory, attempt_id)
    return mine


def _moved_by(pipeline_directory: str) -> int | None:
    """The attempt that put a resumed pipeline's directory in place (``checkpoint_move``): the copy
    or the empty directory it moved there has no attempt directory, so one of a lower id was
    written after the move by a replaced driver of the incarnation before, by the path it held
    (review 30, F3): a partial tree of the old branch, never this branch's checkpoint."""
    mark = read_prepared(pipeline_directory)
    return None if mark is None else mark.get("attempt")


def _link_tree(source: str, target: str) -> None:
    for root, _, files in os.walk(source):
        into = os.path.join(target, os.path.relpath(root, source))
        os.makedirs(into, exist_ok=True)
        for name in files:
            if name.endswith(_SPARKS_TEMPORARY):
                continue
            try:
                os.link(os.path.join(root, name), os.path.join(into, name))
            except OSError:            # a filesystem without hard links: a copy does the same
                shutil.copy2(os.path.join(root, name), os.path.join(into, name))


def _point_at(pipeline_directory: str, mine: str) -> None:
    """``spark`` becomes a link to ``mine`` (a plain ``spark`` was linked into it: it goes)."""
    link = os.path.join(pipeline_directory, SPARK_DIR)
    if os.path.isdir(link) and not os.path.islink(link):
        shutil.rmtree(link)
    fresh = os.path.join(pipeline_directory, f".{SPARK_DIR}.link-{os.path.basename(mine)}")
    if os.path.lexists(fresh):
        os.remove(fresh)
    os.symlink(os.path.basename(mine), fresh)
    os.replace(fresh, link)


def _remove_older(pipeline_directory: str, attempt_id: int) -> None:
    """Older attempts' directories and unfinished stagings: never read again. A zombie still
    writing in its own directory then fails there, which is all it can do."""
    for name in os.listdir(pipeline_directory):
        older = spark_attempt(name)
        staging = name.startswith(_STAGING) and name[len(_STAGING):].isdigit()
        if (older is not None and older < attempt_id) or (staging and int(name[len(_STAGING):]) < attempt_id):
            shutil.rmtree(os.path.join(pipeline_directory, name), ignore_errors=True)


def copy_pipeline_directory(pipeline_directory: str, target: str) -> None:
    """A copy of a pipeline's checkpoint (a savepoint's), its current Spark checkpoint as a
    plain ``spark``: the attempt that restores it claims its own from there."""
    current = spark_checkpoint_dir(pipeline_directory)

    def spark_entries(directory: str, names: list[str]) -> list[str]:
        if directory != pipeline_directory:
            return []
        return [n for n in names if n == SPARK_DIR or spark_attempt(n) is not None or n.startswith(_STAGING)
                or n.startswith(f".{SPARK_DIR}.link-")]

    shutil.copytree(pipeline_directory, target, ignore=spark_entries)
    if os.path.isdir(current):
        shutil.copytree(current, os.path.join(target, SPARK_DIR))


def last_committed_batch(spark_dir: str) -> int | None:
    """The newest batch in a Spark checkpoint's commit log, if any."""
    try:
        names = os.listdir(os.path.join(spark_dir, "commits"))
    except FileNotFoundError:
        return None
    batches = [int(n) for n in names if n.isdigit()]
    return max(batches) if batches else None


def restore_point(spark_dir: str, recorded: int | None) -> int | None:
    """The batch a pipeline starting on ``spark_dir`` starts after (None: a fresh start): Spark's
    last committed batch, or the store's ``recorded`` one when Spark planned it and has not
    committed it. The store records batch K before Spark writes ``commits/K``: an attempt killed
    in between is replaced by one that replays K (its sinks' decisions make that a no-op), so it
    starts from checkpoint K as surely as from one Spark had taken too. A recorded batch Spark
    never planned is another directory's (a resume whose move was never made): not this one's."""
    last = last_committed_batch(spark_dir)
    if recorded is not None and (last is None or recorded > last) and \
            os.path.isfile(os.path.join(spark_dir, "offsets", str(recorded))):
        return recorded
    return last
