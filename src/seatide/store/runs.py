"""Runs: a job id's life from its submission to its history's expiry, across resumes.

A job id may be used again once its previous run has ended and been cleaned up; after its
history expires its rows are gone. A later step of the dead run (an expiry by a slow or
former leader, a zombie driver's report, a slot drop) must never reach the new run. So a
run has an identity no later run shares (``jobs.run_id``, kept by a resume), and everything
a run creates outside the store carries it:

* its checkpoint directories: ``<data>/checkpoints/<job id>/<run id>/<pipeline>``;
* the names its sources give what they create in other systems (replication slots and
  publications) and the ids its sinks commit under: ``run_key`` stands where the job id
  stood;
* attempt ids, which fence drivers, are never reused by the store either (schema.py);
* within a run, each branch of a pipeline's checkpoints (``new_lineage``: a fresh start, a
  restore from a savepoint) commits under transaction ids of its own;
* within a pipeline's directory, each attempt runs Spark in a checkpoint directory of its own
  (``spark_checkpoint_dir``; runtime/spark_checkpoint.py says why).

A job submitted before revision 0011 has no run id: its key is its job id, as its names
were then, so an upgrade finds its slots and directories where they are.
"""

from __future__ import annotations

import json
import os
import re
import secrets

from seatide.store.paths import under

RUN_ID_BYTES = 6        # 48 random bits: a job id's runs never meet one another's


def new_run_id() -> str:
    return secrets.token_hex(RUN_ID_BYTES)


def run_key(job_id: str, run_id: str | None) -> str:
    """What a run's names are made of: its job id, and its run id when it has one."""
    return f"{job_id}.{run_id}" if run_id else job_id


def job_of(key: str) -> str:
    """The job id of a run key (``run_key``'s inverse): what ends in a run id (12 hex digits) after a
    dot is cut off. A key from before revision 0011 is a job id; one of those that itself ends so
    (``orders.0123456789ab``) is read as that job's run, which the job ids' form allows but nobody writes."""
    found = re.fullmatch(rf"(.+)\.[0-9a-f]{{{2 * RUN_ID_BYTES}}}", key)
    return found.group(1) if found else key


def run_root(job_root: str, run_id: str) -> str:
    """The run's checkpoint directory under the job's: no other run ever writes there."""
    return under(job_root, run_id)


def pipeline_dir(run_directory: str, pipeline_id: int) -> str:
    return os.path.join(run_directory, str(pipeline_id))


SPARK_DIR = "spark"                    # a plain checkpoint (a savepoint's, an older layout's), or a link
SPARK_ATTEMPT_PREFIX = "spark.attempt-"


def spark_attempt(name: str) -> int | None:
    """The attempt id of a directory entry named ``spark.attempt-<id>``, else None."""
    if not name.startswith(SPARK_ATTEMPT_PREFIX):
        return None
    suffix = name[len(SPARK_ATTEMPT_PREFIX):]
    return int(suffix) if suffix.isdigit() else None


def spark_checkpoint_dir(pipeline_directory: str, since: int | None = None) -> str:
    """Where a pipeline's current Spark checkpoint is: the attempt directory of the highest
    attempt id (attempt ids only grow, so the newest attempt's), else a plain ``spark``.
    ``since``: attempt directories of lower ids are not the pipeline's (written into a directory
    a resume moved in place by the attempt ``since``, which brought none)."""
    try:
        names = os.listdir(pipeline_directory)
    except FileNotFoundError:
        names = []
    attempts = [(n, name) for name in names
                if (n := spark_attempt(name)) is not None and (since is None or n >= since)]
    return os.path.join(pipeline_directory, max(attempts)[1] if attempts else SPARK_DIR)


# A resume decides what a pipeline's directory becomes; its incarnation's driver makes it so
# (runtime/checkpoint_move.py) and leaves this mark. The mark lives in the directory it made,
# not in the store: it must say what the directory holds even after a crash between the move
# and any store write. The next resume reads it too, to find a move that was never made
# (store/owed_moves.py), so it is defined here, below both.
PREPARED_MARK = "seatide-restore.json"


def read_prepared(pipeline_directory: str) -> dict | None:
    """The directory's mark, its fields checked (every reader reads it here: a field of another type,
    hand-edited or from a broken copy, is an unreadable mark, never a TypeError deep in a reader); None
    without a mark. One that cannot be parsed raises ``ValueError``, naming the field; one that cannot
    be read ``OSError``: each reader decides."""
    try:
        with open(os.path.join(pipeline_directory, PREPARED_MARK)) as handle:
            done = json.load(handle)
    except FileNotFoundError:
        return None
    if not isinstance(done, dict):
        raise ValueError("not a JSON object")
    for field, kinds in (("incarnation", (int,)), ("attempt", (int, type(None))), ("from", (str, type(None))),
                         ("began", (int,))):
        if field in done and (not isinstance(done[field], kinds) or isinstance(done[field], bool)):
            raise ValueError(f"its {field} is {json.dumps(done[field])}, not {' or '.join(_KINDS[k] for k in kinds)}")
    return done


_KINDS = {int: "an integer", str: "a path", type(None): "null"}


def read_move(pipeline_directory: str) -> tuple[int, bool] | None:
    """The move the directory's mark records: the incarnation that made it, and whether it made it
    empty (a fresh start: its ``from`` is null; a savepoint's copy names it); None without a mark.
    Raises as ``read_prepared``."""
    done = read_prepared(pipeline_directory)
    if done is None:
        return None
    return done.get("incarnation"), "from" in done and done["from"] is None


def read_mark(pipeline_directory: str) -> int | None:
    """The incarnation the directory's mark names; None without a mark (raises as ``read_move``)."""
    move = read_move(pipeline_directory)
    return None if move is None else move[0]


def began_anew(pipeline_directory: str) -> dict:
    """What a lineage started in this directory keeps of how it began: ``{"began": n}`` when the
    fresh start decided by the resume of incarnation ``n`` made the directory empty (its mark), else
    nothing (the run's first lineage). Its sinks' save modes are made anew for it, shared by every
    pipeline that decision starts over (``runtime/sink_runs.py``): ``n`` is the mark's ``began``, the
    decision's incarnation, when a later incarnation made a move an earlier one decided and never made
    (``store/owed_moves.py``), else the incarnation that moved it. An unreadable mark is the run's first,
    as before."""
    try:
        done = read_prepared(pipeline_directory)
    except (OSError, ValueError):
        return {}
    if done is None or "from" not in done or done["from"] is not None or not isinstance(done.get("incarnation"), int):
        return {}
    return {"began": done.get("began", done["incarnation"])}


def prepared_for(pipeline_directory: str) -> int | None:
    """The incarnation whose resume's move put this directory in place, or None (never moved, or
    a mark that cannot be parsed). The driver asks before its move: a corrupt mark is taken as not
    this incarnation's, so the move sets the directory aside and writes a good one, rather than the
    attempt failing on it again and again (a resume refuses on it unless --fallback fresh or a
    savepoint named covers it: store/owed_moves.py). A storage error still fails the attempt."""
    try:
        return read_mark(pipeline_directory)
    except ValueError:
        return None


def new_lineage() -> str:
    """A branch of a pipeline's checkpoints: a fresh directory, or a savepoint's restored copy.
    Its batches' transaction ids carry it, so two branches never share one."""
    return secrets.token_hex(8)
