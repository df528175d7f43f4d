"""What a user may ask of SeaTide: submit a job, stop it (cancel or savepoint), resume it.

Each intent exists once, here. The REST API of every coordinator, the CLI talking
straight to a store and local mode (``seatide run``) all call these functions: check the
request, record it in the store as desired state, answer with the job id or a precise
refusal. Only the leader acts on what is recorded (``seatide.coordinator``).

A ``Refusal`` carries its kind; each surface maps kinds once (HTTP status, exit code).
"""

from __future__ import annotations

import enum
import json
from contextlib import contextmanager
from dataclasses import dataclass, field

from seatide import failpoints
from seatide.config.job import ConfigError
from seatide.config.job_environment import MARK, as_given, environment_refusal, given, marked, name_refusal, split
from seatide.config.job_text import JobTextError, read_job_text, substitution_names
from seatide.config.loader import load_job_text
from seatide.config.local_paths import placed_text
from seatide.coordinator.position_check import positions_gone
from seatide.plan.dag import build_plan
from seatide.plan.outline import outline_json
from seatide.secrets import mask_message, mask_refusal, secret_values
from seatide.store.db import Store
from seatide.store.job_ids import BadJobId, JobRefused, check_job_id
from seatide.store.jobs import MAX_JOB_NAME, JobNotFound, load_job, request_stop, submit_job
from seatide.store.node_features import older_leader_may_act
from seatide.store.paths import PathOutsideRoot
from seatide.store.restore import resume_job
from seatide.store.unusable_checkpoints import resume_command

FALLBACKS = ("fail", "fresh")


class RefusalKind(enum.Enum):
    BAD_REQUEST = "bad request"     # the request itself is wrong: a config, an id, an option
    NOT_FOUND = "not found"         # no such job
    CONFLICT = "conflict"           # the job's state forbids it now (already running, ended, ...)


class Refusal(Exception):
    """An intent that was not recorded; ``str()`` says why and what to do instead."""

    def __init__(self, kind: RefusalKind, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Accepted:
    job_id: str
    job_name: str | None = None
    warnings: list[str] = field(default_factory=list)
    status: str | None = None       # the job's status when a stop was asked


def check(text: str, variables: dict[str, str] | None = None, *, source: str | None = None,
          strict: bool = False):
    """Validate a job without recording anything: its ``JobConfig``, or a BAD_REQUEST refusal."""
    return _load(text, given(variables or {}), source or "submitted job", strict)


def stored(text: str, variables: dict[str, str], *, source: str):
    """A recorded job's ``JobConfig``, its variables read by the row's own rule (a row from before values were
    written as given, as it was then): what a view of a stored job draws, as its driver reads it."""
    return _load(text, variables, source, False)


def submit(store: Store, data_dir: str, *, text: str, variables: dict[str, str] | None = None,
           source: str | None = None, job_id: str | None = None, name: str | None = None,
           strict: bool = False, actor: str, pinned_worker: str | None = None,
           cleanup_delay_s: float | None = None, paths_from: str | None = None,
           environment: dict[str, str] | None = None) -> Accepted:
    """Validate a job file's text and record the job as CREATED. ``paths_from``: the directory the
    job's driver runs in, where a client runs it locally (``seatide run``): its relative sink paths
    are recorded made absolute against it; None (a cluster) refuses them (``config/local_paths.py``).

    ``environment``: what the job's ``${NAME}`` falls back to, as the submitting command captured it from
    its own (``config.job_text.captured_environment``); none given is an empty one, never this process's
    (``config/job_environment.py``)."""
    variables = _recorded(variables or {}, environment or {})
    text, config = _placed(text, variables, source or "submitted job", strict, paths_from)
    # Recorded as every view shows it: a name made of a secret variable (``nightly-${tenant}``) is masked in the job
    # lists, /metrics' job_name labels and the answer here alike, none of which reads the config (review 8, F5).
    name = mask_message(name or config.env.name, secret_values(text, variables))
    if len(name) > MAX_JOB_NAME:
        raise Refusal(RefusalKind.BAD_REQUEST, f"the job name is {len(name)} characters long; "
                      f"use at most {MAX_JOB_NAME} (jobName, or job.name in env)")
    _no_older_leader(store, variables, "submitted")
    with _refusals():
        job_id = submit_job(store, text=text, variables=variables, config=config, plan=build_plan(config),
                            outline=outline_json(config), data_dir=data_dir, job_id=job_id, name=name,
                            pinned_worker=pinned_worker, cleanup_delay_s=cleanup_delay_s, actor=actor)
    return Accepted(job_id, name, [str(w) for w in config.warnings])


def stop(store: Store, job_id: str, *, savepoint: bool = False, release: bool = False, actor: str) -> Accepted:
    """Ask for a cancel, or a stop with a savepoint, taken at the next batch boundary.

    ``release``: cancel and release: once the job has ended, what its sources hold on their
    servers (a replication slot) is dropped, and it can then only be resumed fresh; also for a
    job that has already ended (``coordinator/release.py``)."""
    with _refusals():
        status = request_stop(store, check_job_id(job_id), savepoint=savepoint, release=release, actor=actor)
    return Accepted(job_id, status=status)


def dismiss_left(store: Store, job_id: str, holds: str, *, actor: str) -> int:
    """The operator's word that slot ``holds``, which a release of ``job_id`` left, is settled by hand (or can
    never be: its server is gone): it is shown no more (store/left_held.py ``dismiss``); how many records went."""
    from seatide.store.left_held import dismiss

    with store.write() as conn:
        gone = dismiss(conn, job_id, holds, actor)
    if not gone:
        raise Refusal(RefusalKind.NOT_FOUND, f"no release of job {job_id} left a slot {holds} that is still shown")
    return gone


def resume(store: Store, job_id: str, *, text: str | None = None, variables: dict[str, str] | None = None,
           source: str | None = None, strict: bool = False, savepoint_id: int | None = None,
           fallback: str | None = None, actor: str, pinned_worker: str | None = None,
           paths_from: str | None = None, environment: dict[str, str] | None = None) -> Accepted:
    """Start a stopped, failed or killed job's next incarnation from its checkpoints.

    ``text`` and ``variables`` default to the job's own; a changed config must still fit
    the checkpoints (``seatide.store.restore`` checks, and ``fallback`` says what then). A new
    ``text``'s relative sink paths are placed as ``submit`` places them (``paths_from``).
    ``environment``: as ``submit``'s, captured for the new ``text``; none given keeps the job's recorded one
    (``resumed_variables``)."""
    if fallback not in (None, *FALLBACKS):
        raise Refusal(RefusalKind.BAD_REQUEST, f"fallback must be one of {', '.join(FALLBACKS)}, not {fallback!r}")
    with _refusals():
        check_job_id(job_id)
    with store.read() as conn:
        job = load_job(conn, job_id)
    if job is None:
        raise Refusal(RefusalKind.NOT_FOUND, f"no job with id {job_id}")
    variables, unrecorded = resumed_variables(json.loads(job.variables), bool(text), variables, environment)
    if unrecorded:
        _explain_unrecorded(job, text or job.config, variables)
    if text:
        text, config = _placed(text, variables, source or f"job {job_id}", strict, paths_from)
    else:    # as recorded (a job recorded before its paths were placed keeps where it wrote)
        text, config = job.config, _load(job.config, variables, source or f"job {job_id}", strict)
    _no_older_leader(store, variables, "resumed")
    with _refusals():
        # A decision the incarnation before owed and this one carries on (a fresh start, a savepoint's
        # copy: store/owed_moves.py) was not asked for this time: the answer says so, beside the event.
        # Its own lines: the row read again could already be a racing resume's.
        carried = resume_job(store, job_id, plan=build_plan(config), text=text, variables=variables,
                             savepoint_id=savepoint_id, fallback=fallback, pinned_worker=pinned_worker, actor=actor,
                             check_positions=positions_gone, command=resume_command(job_id, savepoint_id, source))
    failpoints.hit("intents.resume_recorded")      # tests: another resume may follow here at once
    return Accepted(job_id, job.name, [str(w) for w in config.warnings] + carried)


def resumed_variables(stored: dict[str, str], new_text: bool, variables: dict[str, str] | None,
                      environment: dict[str, str] | None) -> tuple[dict[str, str], bool]:
    """(the variables a resume records, whether they drop an old row's process environment).

    Nothing new: the job's own, as stored (a row from before environments were recorded keeps reading its
    process's, as it always did). A new text or new variables: marked (``config/job_environment.py``) with the
    environment given (a CLI's capture), else the job's recorded one, else, for an old row, an empty one: a REST
    resume must not read the coordinator's (``_explain_unrecorded`` then says why a name went undefined). The stored
    variables keep the rule they were stored under (``config.filling``); new ones are written as given."""
    if not new_text and variables is None and environment is None:
        return stored, False
    user, recorded = split(stored)
    chosen = environment if environment is not None else recorded
    # An old row now marked, with an environment given too (``"environment": {}``): a name its config read from
    # the process's may be missing from it, as from none (outside review L2).
    if variables is None:
        return _recorded(user, chosen or {}, as_given(stored)), recorded is None
    return _recorded(variables, chosen or {}), recorded is None


def _no_older_leader(store: Store, variables: dict[str, str], what: str) -> None:
    """Refused (CONFLICT), nothing recorded, when ``variables`` carry the mark and the lease may still be held by a
    coordinator of a SeaTide from before revision 0022: leading, one from before recorded environments would read
    the job's ${NAME}s from its own environment (outside review F3). None can lead after it (store/node_features.py);
    one holding the lease copied at the upgrade acts until its expiry, so the mark waits for a new election."""
    if MARK not in variables:
        return
    with store.read() as conn:
        lease = older_leader_may_act(conn)
    if lease is not None:
        raise LeaderAwaited(lease, what)


class LeaderAwaited(Refusal):
    """A marked submit or resume refused until a coordinator of this version is elected on the store. ``why`` says
    what and why; the message adds what to do through a coordinator's API, and each other surface its own (local
    mode elects its own coordinator, the CLI on a store has none)."""

    def __init__(self, lease, what: str):
        self.lease, self.what = lease, what
        self.why = (f"no coordinator of this SeaTide has led since the store was upgraded to revision 0022: the lease "
                    f"copied then (epoch {lease.moved_at_epoch}, coordinator {lease.node_id}) may be held by a "
                    f"coordinator of an older SeaTide, which would fill this job's ${{NAME}}s from its own "
                    f"environment. Nothing was {what}.")
        super().__init__(RefusalKind.CONFLICT, (
            f"{self.why} Start a coordinator of this version (an older one can no longer lead) and ask again once it "
            f"leads (docs/operations.md, Upgrading)"))


def _recorded(variables: dict[str, str], environment: dict[str, str], written_as_given: bool = True) -> dict[str, str]:
    """The variables to store, with the environment given; a user name SeaTide keeps for itself is refused."""
    why = (name_refusal(variables) or name_refusal(environment, "environment variable")
           or environment_refusal(environment))
    if why:
        raise Refusal(RefusalKind.BAD_REQUEST, why)
    return marked(variables, environment, written_as_given)


def _explain_unrecorded(job, text: str, variables: dict[str, str]) -> None:
    """An old row (stored before environments were recorded) resumed with a new text or new variables and no
    environment: a name its config read from the process's environment is now undefined. Refused with why and how
    (outside review F1): a bare "not defined" told the user nothing of what changed."""
    try:
        read_job_text(text, variables)
    except JobTextError as exc:
        stored = json.loads(job.variables)
        if exc.undefined and exc.undefined in substitution_names(job.config, split(stored)[0], as_given(stored)):
            name = exc.undefined
            raise Refusal(RefusalKind.BAD_REQUEST, (
                f"variable ${{{name}}} is not defined: job {job.job_id} was submitted before SeaTide recorded the "
                f"submitter's environment, and its config read ${{{name}}} from the environment of whichever SeaTide "
                f"process parsed it; a resume with a new config, new variables or an environment reads no process's environment, only the one given. "
                f"Resume it with `seatide resume {job.job_id} --config FILE` from a shell that has {name} set, or "
                f"give {name} in the REST request's \"environment\" field (or in its \"variables\", as -i gives "
                f"it)")) from None


def _placed(text: str, variables: dict[str, str], source: str, strict: bool, paths_from: str | None):
    """(text to record, its config): the text with its relative sink paths placed (``paths_from``)."""
    config = _load(text, variables, source, strict)
    try:
        placed = placed_text(config, paths_from)
    except ConfigError as exc:
        raise Refusal(RefusalKind.BAD_REQUEST, mask_refusal(str(exc), secret_values(text, variables))) from None
    return (text, config) if placed == text else (placed, _load(placed, variables, source, strict))


def _load(text: str, variables: dict[str, str], source: str, strict: bool):
    if not isinstance(text, str) or not text.strip():
        raise Refusal(RefusalKind.BAD_REQUEST, f"the job config is empty\n  in {source}")
    try:
        # Intents record a job; its driver runs it. AES-shaded secrets are checked here, decrypted there.
        return load_job_text(text, variables, source_name=source, strict=strict, runs_here=False)
    except ConfigError as exc:
        # A message may quote a value ("must be an int, got ..."): never a secret of the job.
        raise Refusal(RefusalKind.BAD_REQUEST, mask_refusal(str(exc), secret_values(text, variables))) from None


@contextmanager
def _refusals():
    """The store's refusals as intent refusals, by kind."""
    try:
        yield
    except PathOutsideRoot as exc:
        raise Refusal(RefusalKind.BAD_REQUEST, str(exc)) from None
    except JobRefused as exc:
        kind = (RefusalKind.NOT_FOUND if isinstance(exc, JobNotFound)
                else RefusalKind.BAD_REQUEST if isinstance(exc, BadJobId) else RefusalKind.CONFLICT)
        raise Refusal(kind, str(exc)) from None
