"""The resume's early check that its sources' servers still have the positions its checkpoints resume from.

Asked by the process recording the resume (store/restore.py ``check_positions``); moved out of
coordinator/source_watch.py, whose leader's watch measures what the sources hold, to keep each module small.
"""

from __future__ import annotations

import json
import logging
import threading

from seatide.plugin.server_errors import lasting_fix, passing
from seatide.store.runs import run_key, spark_checkpoint_dir
from seatide.store.unusable_checkpoints import PositionsAsked

log = logging.getLogger(__name__)


def positions_gone(job, plan, restored: list[tuple[int, str, int | None]], deadline_s: float = 5.0) -> PositionsAsked:
    """The pipelines a resume restores in place (id, directory, the batch the store recorded) whose
    sources' servers no longer have the position their checkpoint resumes from, each with the error
    its read would fail with (``Source.position_gone``). Asked by the process recording the resume,
    which reads the checkpoint directories already (store/restore.py): such a pipeline's checkpoint
    cannot be used, so the resume is refused (REST 409, CLI exit 1, nothing recorded) unless its
    fallback is ``fresh``, which starts that pipeline over.

    Every source is asked at once, and the whole check waits ``deadline_s`` at most: the resume is
    answered while a client waits for it (the CLI's HTTP client gives up after 30 s), and a server
    that takes connections without answering holds its own ask longer than its timeout (libpq
    tries twice with sslmode=prefer). A source not answered by then, like one that cannot be reached
    (down, or out of this process's network), is not checked here: the driver's read checks the same
    and fails alike. Its ask goes on in a daemon thread, bounded by its own timeout, answered to no one.
    Each such source is in the answer's ``unreached``, with its server's address and the error (masked):
    the resume's answer says it was not checked, and why (outside review 9, F4). A server that answered with
    an error (a role it refuses, a privilege missing) or a bug is no unreachable server: ``failed`` names the
    error and its fix, and the resume goes on likewise (outside review of 7d56489..26756a7, F6)."""
    from seatide.secrets import mask_message, secret_values

    asks = _position_asks(job, plan, restored)
    secrets = secret_values(job.config, json.loads(job.variables or "{}"))
    unreached: dict[tuple[int, int], str] = {}
    failed: dict[tuple[int, int], str] = {}
    answers: dict[tuple[int, int], str | None] = {}
    done = threading.Event()
    lock = threading.Lock()

    def ask(pipeline_id: int, index: int, spec, offset: dict) -> None:
        try:
            why = spec.plugin.position_gone(run_key(job.job_id, job.run_id), pipeline_id, spec.plugin_id, offset,
                                            deadline_s)
        except Exception as exc:  # noqa: BLE001 - not known here: the read decides
            log.info("job %s pipeline %s: %s's position not checked before the resume (%s); its read will",
                     job.job_id, pipeline_id, spec.plugin_id, type(exc).__name__)
            why = None
            with lock:
                said = " ".join(f"{type(exc).__name__}: {exc}".split())       # libpq's hint is on a line of its own
                said = mask_message(said, secrets)[:300]
                if passing(exc):    # unreachable, or a condition that passes (busy, starting up)
                    unreached[(pipeline_id, index)] = said
                else:       # the server answered (a role it refuses, a privilege) or a bug: named as what it is
                    failed[(pipeline_id, index)] = f"{said}; {lasting_fix(exc)}"
        with lock:
            answers[(pipeline_id, index)] = why
            if len(answers) == len(asks):
                done.set()

    for pipeline_id, index, spec, offset in asks:
        threading.Thread(target=ask, args=(pipeline_id, index, spec, offset), daemon=True,
                         name=f"position-check-{job.job_id}-{pipeline_id}-{index}").start()
    if asks and not done.wait(deadline_s):
        with lock:
            late = [f"{pid}/{spec.plugin_id}" for pid, index, spec, _ in asks if (pid, index) not in answers]
        log.info("job %s: sources %s did not answer the position check within %.0f s; their reads will check",
                 job.job_id, ", ".join(late), deadline_s)
    asked = PositionsAsked()
    with lock:
        for (pipeline_id, _), why in sorted(answers.items()):
            if why is not None:
                asked.gone.setdefault(pipeline_id, why)
        for pipeline_id, index, spec, _ in asks:
            error = unreached.get((pipeline_id, index))
            where = f" at {spec.plugin.server_address()}" if spec.plugin.server_address() else ""
            if (pipeline_id, index) in failed:
                asked.failed.setdefault(pipeline_id, []).append(
                    f"{spec.name} ({spec.plugin_id}){where}: the server answered the position check with an error "
                    f"({failed[(pipeline_id, index)]})")
                continue
            if error is None and (pipeline_id, index) in answers:
                continue
            error = error or f"no answer within {deadline_s:g} s"
            asked.unreached.setdefault(pipeline_id, []).append(
                f"{spec.name} ({spec.plugin_id}){where} could not be reached to check its checkpoint's position "
                f"({error})")
    return asked


def _position_asks(job, plan, restored) -> list[tuple[int, int, object, dict]]:
    """(pipeline, source index, its spec, its checkpointed offset) of each source that can tell."""
    from seatide.plugin.base import Source
    from seatide.runtime.offset_log import logged_offsets
    from seatide.runtime.spark_checkpoint import restore_point

    asks = []
    for pipeline_id, directory, recorded in restored:
        spark_dir = spark_checkpoint_dir(directory)
        batch = restore_point(spark_dir, recorded)
        offsets = logged_offsets(spark_dir, batch) if batch is not None else None
        for index, spec in enumerate(plan.pipeline(pipeline_id).sources):
            offset = offsets[index] if offsets and index < len(offsets) else None
            if offset is not None and type(spec.plugin).position_gone is not Source.position_gone:
                asks.append((pipeline_id, index, spec, offset))
    return asks

