"""The refusal of a resume some of whose pipelines cannot go on from their checkpoints.

``store/restore.py`` decides, once per pipeline, whether its checkpoint can be used; a pipeline that
cannot is refused unless the fallback is ``fresh``, which starts it over. Two kinds of reason reach
the user here, and each names its own way on: a checkpoint that is missing, unreadable or written
for another pipeline (fix the cause, or start over), and a source position gone from its server (a
dropped replication slot, a purged binlog file: ``coordinator/position_check.positions_gone``), which
nothing but a new start can fix. A source whose server could not be asked (down, or out of the
asking process's network) is neither: its position is not known to be gone, so its pipeline resumes
and its driver's read checks again; the answer, or the refusal for the others, says which server was
not reached and that the way on is to resume again once it can be (outside review 9, F4).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PositionsAsked:
    """What a resume's early position check found (``coordinator/position_check.positions_gone``)."""
    gone: dict[int, str] = field(default_factory=dict)                 # pipeline: why its position is gone
    unreached: dict[int, list[str]] = field(default_factory=dict)      # pipeline: each source not asked, and why
    failed: dict[int, list[str]] = field(default_factory=dict)         # pipeline: each source whose ask failed otherwise

    def not_checked(self) -> list[str]:
        """One line per source whose server could not be asked, of a pipeline that resumes from its checkpoint."""
        return [f"pipeline {pid}: its source {why}: its position is not known to be gone, so a resume goes on "
                "from its checkpoint and its driver's read checks again; if that cannot reach the server either, the "
                "job fails saying so: resume it again once the server can be reached"
                for pid, whys in sorted(self.unreached.items()) if pid not in self.gone for why in whys] + \
            [f"pipeline {pid}: its source {why}: its position is not known to be gone, so a resume goes on from its "
             "checkpoint, and its driver's read fails alike unless that is fixed first"
             for pid, whys in sorted(self.failed.items()) if pid not in self.gone for why in whys]


def resume_command(job_id: str, savepoint_id: int | None = None, source: str | None = None) -> str:
    """The resume the user asked for, as a command to give again: its savepoint and changed job file
    kept (a way on that left them out resumed another state, or the job's old config)."""
    return " ".join(["seatide resume", shlex.quote(job_id), *(["--from", str(savepoint_id)] if savepoint_id is not None else []),
                     *(["--config", shlex.quote(source)] if source else [])])


def refusal(job_id: str, problems: list, asked: PositionsAsked, command: str | None = None,
            left_out: str | None = None) -> str:
    """The message of a refused resume: every pipeline (``PipelinePlan``) with its problem, and the ways on
    (``command``: the resume asked for, ``resume_command``), what it says of the pipelines its config leaves
    out (``store/left_out.py``), then the sources whose servers were not reached."""
    unchecked = "".join(f". Not checked: {line}" for line in asked.not_checked())
    said = _refusal(job_id, problems, asked.gone, command, bool(left_out)) if problems else f"cannot resume job {job_id}"
    return said + (f"{'. Also' if problems else ':'} {left_out}" if left_out else "") + unchecked


def _refusal(job_id: str, problems: list, gone: dict[int, str], command: str | None, leaves_out: bool) -> str:
    lines = "; ".join(f"pipeline {p.pipeline_id}: {p.problem}" for p in problems)
    fresh = f"`{command or resume_command(job_id)} --fallback fresh` (restore.fallback = fresh)"
    rewrite = [p.pipeline_id for p in problems if getattr(p, "rewrites", False)]
    # The fallback starts over every pipeline with a problem and leaves out every one the config lacks: it is a
    # way on only when all of that is safe. Not with one whose start over writes its rows again, nor beside a
    # pipeline left out, which store/left_out.py explains (outside review of a7e109b..db1751c, F1 and F2).
    offered = not rewrite and not leaves_out
    if all(p.pipeline_id in gone for p in problems):
        return (f"cannot resume job {job_id}: its checkpoint's source position is gone from the server. {lines}" + (
                f" Or start {'it' if len(problems) == 1 else 'those pipelines'} over with {fresh}: only a pipeline "
                "whose position is gone starts over, every source of it from its own startup.mode (initial: a new "
                "snapshot, then changes; latest or a given position: the changes made since the checkpoint are "
                "never read), and its sinks get every row again under their save modes (a keyless sink keeps "
                "its old rows unless its save mode empties it); the others resume from their checkpoints"
                if offered else ""))
    if rewrite:
        # each names the way on that writes no row twice; starting over is none (outside review of b5aba34..HEAD,
        # R1 and R3: it was advised for a pipeline brought back, or one a savepoint does not hold)
        them = "it" if len(rewrite) == 1 else "them"
        named = "" if len(rewrite) == len(problems) else f" pipeline{'s' if len(rewrite) > 1 else ''} " \
            f"{', '.join(map(str, rewrite))}"
        others = "" if not named else (" Fix the others' cause (restore the checkpoint directory, or resume with the "
                                       "job's original config).")
        return (f"cannot resume job {job_id}: {lines}. Nothing was recorded.{others} "
                f"Starting{named or ' ' + them} over ({fresh}) would write again every row {them} committed")
    return (f"cannot resume job {job_id}: {lines}. Fix the cause (restore the checkpoint directory, or resume with "
            "the job's original config)" + (f", or start those pipelines over explicitly with {fresh}"
                                            if offered else ""))
