"""What a run's sources hold outside Spark (a replication slot), dropped through the door.

Called by the cleanup, the history expiry and the release (``coordinator/cleanup.py``,
``coordinator/release.py``), always inside ``door.destructive_step``'s transaction, which has
checked that the run the step was decided for is still the one it acts on.

Names SeaTide makes carry the job and the run (``store/runs.py``): no other run can hold them,
and the run fence is all they need. A name the user chose (``slot.name``: ``Source.shared_names``)
is the same in every run that names it, a newer run of the job id as much as another job. So
such a name is kept (not dropped) while any other run whose row is in the store names it and has
not been released: the job id's current run when the step is for an earlier one, or any other
job's. That is read on the door's connection, in the door's transaction: a resubmission or a
resume writes the job row the door holds (on SQLite, any write waits for it). The source has the
last word: a slot whose mark names another run (of another job, or a later run of this job id that
made it again) is never dropped, and one this very run made is dropped all the same
(connectors/postgres_cdc/ownership.py).

The door's transaction holds the job row (and on SQLite the whole store's write lock), and the
leader's tick, its lease renewal among it, waits for the step: so the sources are asked at once
and the whole step waits ``OUTSIDE_WAIT_S`` at most (a slot still held by a walsender past it, or a
server that does not answer: the step fails and is retried later, the slot untouched) rather than
wait for a slot to come free inside the lock.
"""

from __future__ import annotations

import json
import logging
import threading

from sqlalchemy import and_, or_, select
from sqlalchemy.engine import Connection

from seatide.coordinator.left_out_sources import left_out_configs, unloadable_note
from seatide.store import schema as s
from seatide.store.events import record_event
from seatide.store.left_held import record_left_held
from seatide.store.runs import run_key

log = logging.getLogger(__name__)

# How long one source may take to release, inside the door. Well under the self-fence (6 s,
# runtime/heartbeat.py) and the lease (2 s ttl, renewed every 0.5 s, by the same thread).
OUTSIDE_WAIT_S = 1.0
# What each source is given of it: its own bound ends first, so the reason it gives up (a slot a
# walsender holds, named) reaches the step's RELEASE_RETRY event, not only "did not answer".
SOURCE_WAIT_S = 0.7 * OUTSIDE_WAIT_S


def release_sources(conn: Connection, result, actor: str = "", epoch: int | None = None) -> None:
    """Let each source drop what it created outside Spark for the run (idempotent). ``result``:
    a job result, or a jobs row (a release), with its run's config; ``conn``: the door's; ``actor``
    and ``epoch`` sign the warning events it writes there."""
    job = result       # the run's own config, kept with its result (a later run may have replaced the job row)
    if result.config is None:      # a result from before revision 0011
        job = conn.execute(select(s.jobs.c.config, s.jobs.c.variables).where(
            s.jobs.c.job_id == result.job_id)).first()
    if job is None:
        return
    unreleased = None
    try:
        pipelines = _loaded(result, job.config, job.variables)
    except SourcesNotReleased as exc:      # its own sources stay; the left-out ones are released all the same
        pipelines, unreleased = None, exc
    # each source with the config it was loaded from: what it leaves is asked of that config's source later
    sources = [(spec, job) for specs in (pipelines or {}).values() for spec in specs]
    # The pipelines this config leaves out (a resume's --fallback fresh) kept their slots: their sources are read
    # from the config of the incarnation where they last ran (coordinator/left_out_sources.py), and are told even
    # when this config no longer loads (review F1: from the pipelines the resume recorded).
    for then in left_out_configs(conn, result.job_id, result.run_id, result.incarnation,
                                 set(pipelines) if pipelines is not None else None):
        try:
            earlier = _pipeline_sources(result.job_id, then.config, then.variables)
        except _ConfigUnloadable as exc:
            # Review F2: a result's config cannot be edited, so refusing would hold the release for good.
            if may_hold(then.config, json.loads(then.variables or "{}")):
                _left_behind(conn, result, then, str(exc), actor, epoch)
            continue
        sources += [(spec, then) for pid in sorted(then.pipeline_ids & set(earlier)) for spec in earlier[pid]]
    for spec, origin, left in _release_at_once(conn, result, sources):
        _told_left(conn, result, origin, spec, left, actor, epoch)
    if unreleased is not None:
        raise unreleased


def _release_at_once(conn: Connection, result, sources: list) -> list[tuple]:
    """Ask every source at once, the whole step bounded by ``OUTSIDE_WAIT_S`` (review F3: one after another,
    three silent servers held the leader's thread 17 s, past its 2 s lease, and a PostgreSQL store killed the
    door's idle transaction). A source that did not answer by then fails the step, retried later: its ask goes on
    in a daemon thread, bounded by its own timeout, and a drop it makes meanwhile is found done by the retry.
    ``sources``: (spec, the config it was loaded from) each. What the sources left on their servers, no run's
    to drop: (spec, its config, ``LeftBehind``) each."""
    from seatide.secrets import mask_message
    from seatide.store.event_masking import config_secrets

    asks = []
    for spec, origin in sources:       # read on the door's connection, here: never from the asking threads
        kept = _claimed_elsewhere(conn, result, spec.plugin.shared_names())
        # A slot named after a secret variable, a connector's exception quoting its URL: masked in the log lines.
        secrets = config_secrets(origin.config or "", origin.variables)
        if kept:
            log.info("job %s run %s: %s kept, another run still names it", result.job_id, result.run_id,
                     mask_message(", ".join(sorted(kept)), secrets))
        asks.append((spec, origin, kept, secrets))
    if not asks:
        return []
    key = run_key(result.job_id, result.run_id)
    answers: dict[int, BaseException | None] = {}
    left: list[tuple] = []
    lock, done, given_up = threading.Lock(), threading.Event(), threading.Event()

    def ask(number: int, spec, origin, kept: frozenset[str], secrets: frozenset) -> None:
        error, leaves = None, ()
        try:
            leaves = spec.plugin.release(key, keep=kept, within_s=SOURCE_WAIT_S) or ()
        except BaseException as exc:  # noqa: BLE001 - handed to the step, which fails and is retried
            error = exc
        with lock:
            answers[number] = error
            left.extend((spec, origin, leave) for leave in leaves)
            if len(answers) == len(asks):
                done.set()
            if given_up.is_set():        # the step ended without it: its word goes to the log at least
                log.warning("job %s run %s: the release of %s (%s) answered after the step ended: %s",
                            result.job_id, result.run_id, spec.name, spec.plugin_id,
                            mask_message(str(error), secrets) if error else "done")

    for number, (spec, origin, kept, secrets) in enumerate(asks):
        threading.Thread(target=ask, args=(number, spec, origin, kept, secrets), daemon=True,
                         name=f"release-{result.job_id}-{spec.plugin_id}").start()
    done.wait(OUTSIDE_WAIT_S)
    with lock:
        given_up.set()
        errors = [answers[number] for number in sorted(answers) if answers[number] is not None]
        late = [f"{spec.name} ({spec.plugin_id})" for number, (spec, *_) in enumerate(asks) if number not in answers]
        left = list(left)
    if errors:
        raise errors[0]
    if late:
        raise SourcesUnanswered(f"its sources were not all released: {', '.join(late)} did not answer within "
                                f"{OUTSIDE_WAIT_S:g} s; retried later, what they hold left as it was")
    return left


def _told_left(conn: Connection, result, origin, spec, left, actor: str, epoch: int | None) -> None:
    """A warning event and log line for what a source's release left on its server and no run will drop
    (review finding 4: a slot an earlier SeaTide marked, which this run never claimed, kept retaining WAL
    with only a log line): which, why, the WAL it keeps as measured at the release, and how to settle it;
    and its ``left_held`` row, shown whatever becomes of the run and the job row until the slot is gone
    (store/left_held.py; review finding F2: a dead run's or a forgotten job's event was shown nowhere).
    In the step's transaction: written with the release, gone with it if the step fails (and retried).
    ``origin``: the config and variables ``spec`` was loaded from (review 2 F2: a left-out pipeline's is an
    earlier incarnation's, maybe naming another server, not the run's current one)."""
    from seatide.secrets import mask_message, secret_values

    secrets = secret_values(origin.config or "", json.loads(origin.variables or "{}"))
    held, why, settle = left.held, mask_message(left.why, secrets), mask_message(left.settle, secrets)
    log.warning("job %s run %s: the release of %s (%s) leaves %s on its server, retaining %s bytes of WAL (%s): %s. "
                "To settle it: %s", result.job_id, result.run_id, spec.name, spec.plugin_id,
                mask_message(held.holds, secrets),
                held.retained_bytes if held.retained_bytes is not None else "an unknown number of",
                held.state or "-", why, settle)
    record_event(conn, "RELEASE_LEFT_HELD", actor, result.job_id, result.incarnation, epoch, level="WARNING",
                 run_id=result.run_id, source=spec.plugin_id, connector=spec.name, holds=held.holds,
                 retainedBytes=held.retained_bytes, state=held.state, lost=held.lost, why=why,
                 settle=settle)
    record_left_held(conn, result, origin, spec.plugin_id, spec.name, held, why, settle)


def _left_behind(conn: Connection, result, then, reason: str, actor: str, epoch: int | None) -> None:
    """A warning event and log line for left-out pipelines whose config no longer loads: the release goes on."""
    from seatide.secrets import mask_message
    from seatide.store.event_masking import config_secrets

    h = s.source_holds.c
    holds = [held for held in conn.execute(select(h.holds).where(and_(
        h.job_id == result.job_id, h.pipeline_id.in_(sorted(then.pipeline_ids)), h.holds.is_not(None)))).scalars()]
    note = unloadable_note(run_key(result.job_id, result.run_id), then, reason, holds)
    # the holds are named by that config (a slot after a secret variable): masked by its secrets (review 9, F10)
    log.warning("job %s run %s: %s", result.job_id, result.run_id,
                mask_message(note, config_secrets(then.config or "", then.variables)))
    record_event(conn, "LEFT_OUT_NOT_RELEASED", actor, result.job_id, result.incarnation, epoch, level="WARNING",
                 run_id=result.run_id, pipelines=sorted(then.pipeline_ids), holds=holds, error=note)


def _loaded(result, config_text: str, variables_json: str | None) -> dict[int, list] | None:
    """The config's sources by pipeline id; None when it no longer loads and none of its sources may
    hold anything, or SourcesNotReleased when one may."""
    try:
        return _pipeline_sources(result.job_id, config_text, variables_json)
    except _ConfigUnloadable as exc:
        # Review 30, F5: this used to release nothing and let the step record RELEASED (or forget
        # the run) while the slot stayed, retaining WAL, and unwatched once source_holds went.
        if may_hold(config_text, json.loads(variables_json or "{}")):
            raise SourcesNotReleased(not_released(run_key(result.job_id, result.run_id), str(exc))) from None
        log.warning("job %s: its config no longer loads (%s); none of its sources holds anything to release",
                    result.job_id, exc)
        return None


def _pipeline_sources(job_id: str, config_text: str, variables_json: str | None) -> dict[int, list]:
    """The config's sources by pipeline id, or _ConfigUnloadable."""
    from seatide.config.loader import ConfigError
    from seatide.plan.dag import build_plan

    config = _config(job_id, config_text, variables_json)
    try:
        return {p.pipeline_id: list(p.sources) for p in build_plan(config).pipelines}
    except ConfigError:     # loads, but its pipelines cannot be told: each source (0: no pipeline it has),
        return {0: list(config.sources)}    # and every pipeline of the run is read from earlier configs too


class SourcesNotReleased(Exception):
    """What a run's sources hold outside Spark could not be released, and may still be there: the
    step fails (retried, an event with this message) rather than record a release not done."""


class SourcesUnanswered(TimeoutError):
    """A source did not answer the release within the step's bound: an outage, retried (server_errors.passing)."""


class _ConfigUnloadable(Exception):
    """A stored config that no longer loads (its message masked)."""


def sources_of(job_id: str, config_text: str, variables_json: str | None) -> list:
    """The config's sources (each a PluginSpec), loaded asking no server; or _ConfigUnloadable (masked)."""
    return _config(job_id, config_text, variables_json).sources


def _config(job_id: str, config_text: str, variables_json: str | None):
    from seatide.config.loader import ConfigError, load_job_text
    from seatide.plugin.unasked import servers_unasked

    variables = json.loads(variables_json or "{}")
    try:
        with servers_unasked():      # inside the door: a release needs no table (plugin/unasked.py)
            return load_job_text(config_text, variables, source_name=f"job {job_id}")
    except ConfigError as exc:   # e.g. a plugin this version no longer has, a secret that cannot be decrypted
        from seatide.secrets import mask_message, secret_values
        raise _ConfigUnloadable(mask_message(str(exc), secret_values(config_text, variables))) from None


def may_hold(text: str, variables: dict) -> bool:
    """Whether a source of a config that no longer loads may hold something outside Spark: one
    whose plugin is gone, or one that releases (its block may name its own slot), or a config
    whose sources cannot even be told."""
    from seatide.config.loader import ConfigError, load_job_outline
    from seatide.plugin.base import Source
    from seatide.plugin.registry import lookup

    try:
        _, specs = load_job_outline(text, variables)
    except (ConfigError, ValueError):
        return True
    for spec in specs:
        cls = lookup("source", spec.name) if spec.kind == "source" else Source
        if cls is None or getattr(cls, "release", Source.release) is not Source.release:
            return True
    return False


def not_released(key: str, reason: str) -> str:
    """What the operator reads: what may still be held, and the two ways to free it."""
    from seatide.connectors.postgres_cdc.slot import job_prefix

    prefix = job_prefix(key)
    pattern = prefix.replace("_", "\\_")      # LIKE's _ is any character
    return (f"its sources were not released: its config no longer loads ({reason}). What they created on their "
            f"servers may still be there: a Postgres-CDC source's replication slot and publication, named "
            f"{prefix}... (or its slot.name), keep retaining WAL. Make the config load again (the plugin "
            "installed, the secret readable) and the release is retried on its own, or drop them on the source "
            f"database: SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE "
            f"'{pattern}%'; and DROP PUBLICATION for each name of SELECT pubname FROM pg_publication WHERE pubname "
            f"LIKE '{pattern}%'")


def _claimed_elsewhere(conn: Connection, result, names: tuple[str, ...]) -> frozenset[str]:
    """Those of ``names`` that another run in the store names too, unless that run is released or
    being released (RELEASING: it drops them itself, and no resume lands before it is done).

    Only the jobs rows count: a job id's earlier runs are dead once it was submitted again (they
    can never resume). A row is loaded only when its config or
    variables spell the name (a name built from pieces is missed: see docs/operations.md)."""
    if not names:
        return frozenset()
    j = s.jobs.c
    spelled = or_(*[column.contains(name, autoescape=True) for name in names for column in (j.config, j.variables)])
    others = conn.execute(select(j.job_id, j.run_id, j.config, j.variables).where(and_(
        spelled, or_(j.release.is_(None), j.release == "REQUESTED"),
        ~and_(j.job_id == result.job_id, j.run_id.is_not_distinct_from(result.run_id))))).all()
    claimed: set[str] = set()
    for other in others:
        try:
            specs = sources_of(other.job_id, other.config, other.variables)
        except _ConfigUnloadable:
            # its config spells the names and cannot be read: it may name them (the safe side is to keep)
            claimed.update(name for name in names if name in (other.config or "") + (other.variables or ""))
            continue
        for spec in specs:
            claimed.update(set(names) & set(spec.plugin.shared_names()))
    return frozenset(claimed)
