"""A resumed pipeline's checkpoint put in place by its incarnation's driver: the resume
(``store/restore.py``) only decides what goes where; this moves the directories.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from typing import Callable

from seatide import failpoints
from seatide.runtime.commit_log import adopt_marks, read_json, write_json_atomic
from seatide.store.runs import (PREPARED_MARK, SPARK_DIR, new_lineage, prepared_for, spark_attempt,
                                spark_checkpoint_dir)


def _set_aside(path: str, why: str, now: float) -> str | None:
    """Rename ``path`` aside, named by the store's time ``now`` in ms: retention prunes these
    by the store's clock (coordinator/retention.py), not by this host's."""
    if not os.path.exists(path):
        return None
    target = f"{path}.{why}-{int(now * 1000)}"
    os.rename(path, target)
    return target


MOVE_LOCK = ".seatide-prepare.lock"
MOVE_LOCK_WAIT_S = 60.0


def prepare_checkpoint(checkpoint_dir: str, incarnation: int, source: str | None, attempt_id: int,
                       fence: Callable[[], float], began: int | None = None) -> dict | None:
    """Put a resumed pipeline's checkpoint in place: a copy of ``source`` (a savepoint), or
    an empty directory when it starts over (``source`` None). The old one is set aside.

    The resume only recorded what to do (its compare-and-set comes first, no file touched);
    the incarnation's driver does it here, before the pipeline starts. Idempotent: a marker
    says it is done for this incarnation; a crash half-way leaves a staging copy of the
    attempt's own (the next attempt removes it, under the lock), or an old directory already
    set aside.

    The move is a destructive step: set aside, the live directory is gone from its place. A
    zombie (a replaced attempt paused after its check) must never move its replacement's
    (issue 30, finding 16). So each attempt stages apart, and the move runs under a lock
    every attempt of the run takes for it (``flock``: a pause does not lose it, only death
    does), with ``fence()`` (the attempt still current: ``AttemptFenced`` otherwise; it
    returns the store's time) and the marker read again under it. A zombie that takes the
    lock after its replacement has taken over is fenced off; one that moved before that did
    this incarnation's move, which its replacement then finds done.
    ``began``: the incarnation whose resume decided a fresh start (``source`` None) that a later one
    carries on, kept in the mark: every pipeline one decision starts over shares its save modes
    (``store.runs.began_anew``). Returns what was done (for the event log), None when it was done before."""
    if prepared_for(checkpoint_dir) == incarnation:
        return None
    staging = f"{checkpoint_dir}.restoring-{incarnation}-{attempt_id}"      # this attempt's alone
    shutil.rmtree(staging, ignore_errors=True)
    if source is not None:
        shutil.copytree(source, staging)
        _plain_spark(staging)
        _branch(staging)
    else:
        os.makedirs(staging)
    # ``attempt``: Spark attempt directories of lower ids found here later are a replaced driver's
    # (runtime/spark_checkpoint.py); a savepoint's copy holds a plain ``spark`` only
    began = {"began": began} if source is None and began is not None else {}
    write_json_atomic(os.path.join(staging, PREPARED_MARK), {"incarnation": incarnation, "from": source,
                                                           "attempt": attempt_id, **began})
    failpoints.hit("driver.checkpoint_staged")
    try:
        with _move_lock(os.path.dirname(checkpoint_dir.rstrip("/"))):
            now = fence()
            _remove_older_stagings(checkpoint_dir, incarnation, attempt_id)
            if prepared_for(checkpoint_dir) == incarnation:
                shutil.rmtree(staging, ignore_errors=True)
                return None
            set_aside = _set_aside(checkpoint_dir, "replaced" if source is not None else "discarded", now)
            os.rename(staging, checkpoint_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {"source": source, "set_aside": set_aside}


def _remove_older_stagings(checkpoint_dir: str, incarnation: int, attempt_id: int) -> None:
    """Staging copies of replaced attempts (one killed half-way): fenced off, never moved again."""
    root, name = os.path.split(checkpoint_dir.rstrip("/"))
    prefix = f"{name}.restoring-"
    for entry in os.listdir(root):
        older = entry[len(prefix):].split("-") if entry.startswith(prefix) else None
        if older and older[0].isdigit() and int(older[0]) <= incarnation and (
                len(older) == 1 or (older[1].isdigit() and int(older[1]) < attempt_id)):
            shutil.rmtree(os.path.join(root, entry), ignore_errors=True)


@contextlib.contextmanager
def _move_lock(run_directory: str):
    """The run's checkpoint-move lock, held until the block ends (or the holder dies)."""
    os.makedirs(run_directory, exist_ok=True)
    fd = os.open(os.path.join(run_directory, MOVE_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + MOVE_LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise RuntimeError(f"another driver of this job has held the checkpoint move lock in "
                                       f"{run_directory} for {MOVE_LOCK_WAIT_S:.0f} s (a replaced driver, "
                                       "paused?); this attempt fails and is retried") from None
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)        # releases the lock


def _plain_spark(checkpoint_dir: str) -> None:
    """The copy's Spark checkpoint as a plain ``spark``, as ``copy_pipeline_directory`` makes a
    savepoint's: the moved directory then holds no attempt directory, and one found there later
    is a replaced driver's (``spark_checkpoint.claim``). A copy of another make is brought to it."""
    current = spark_checkpoint_dir(checkpoint_dir)
    if os.path.basename(current) == SPARK_DIR:
        return
    plain = os.path.join(checkpoint_dir, SPARK_DIR)
    if os.path.islink(plain) or os.path.isfile(plain):
        os.remove(plain)
    shutil.rmtree(plain, ignore_errors=True)
    os.rename(current, plain)
    for name in os.listdir(checkpoint_dir):
        if spark_attempt(name) is not None:
            shutil.rmtree(os.path.join(checkpoint_dir, name), ignore_errors=True)


def _branch(checkpoint_dir: str) -> None:
    """A savepoint's copy continues under a lineage of its own: its batches after the savepoint
    are planned again, maybe with other boundaries, and must never be taken for the batches the
    old lineage committed there (their transaction ids carry the lineage)."""
    path = os.path.join(checkpoint_dir, "seatide.json")
    meta = read_json(path)
    if meta is not None:
        origin = meta.get("origin", meta.get("lineage"))      # where the run's output began: kept
        lineage = new_lineage()
        # the sinks' marks of the copied batches first: the new lineage must find them its own
        adopt_marks(checkpoint_dir, meta.get("lineage"), lineage)
        write_json_atomic(path, {**meta, "lineage": lineage, "branched_from": meta.get("lineage"),
                                 "origin": origin})
