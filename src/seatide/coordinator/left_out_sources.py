"""The configs that name the pipelines a job's current config leaves out, for their sources' holds.

A resume may leave a pipeline out on purpose (``--fallback fresh``, store/left_out.py): it is not
run, and its checkpoint stays so a later resume can bring it back. Its Postgres-CDC source's
replication slot stays too, and the server keeps every WAL segment from the slot's ``restart_lsn``
for as long as the slot exists. The current config no longer names that source, so the leader's
watch (coordinator/source_watch.py) and the release of the run's sources (coordinator/source_release.py)
read it from the config of the incarnation where the pipeline last ran: ``job_results`` keeps each
ended incarnation's config text and variables.

A pipeline is matched by its id, as the resume matches them (store/restore.py): the pipelines the
run has had with a checkpoint directory (``pipelines`` rows since the run's first incarnation),
less those of the current config. One brought back by a later resume is in the current config
again, and watched from it alone.

An earlier config that no longer loads (a plugin it used gone after an upgrade) is a result's, which the
operator cannot edit: it must not hide the slot nor hold the run's release for good (outside review of
642a2cc/2e93916, F2). The watch shows such a pipeline as an error row, and the release goes on past it with
a warning event (``unloadable_note``: what is known of the slot, and how to drop it by hand).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, func, or_, select

from seatide.store import schema as s


@dataclass(frozen=True)
class LeftOutConfig:
    """One earlier incarnation's config, and the pipelines left out since that last ran there."""
    incarnation: int
    config: str
    variables: str | None
    pipeline_ids: frozenset[int]


def left_out_configs(conn, job_id: str, run_id: str | None, incarnation: int,
                     kept: set[int] | frozenset[int] | None) -> list[LeftOutConfig]:
    """For the pipelines the run had up to ``incarnation`` and ``kept`` (its config's pipeline ids)
    lacks: the config of the newest incarnation of the run, no later than where each last ran,
    whose result is still stored (one resumed before it ended has none: an earlier one names it).
    Whether that config has the pipeline is for its loader to say (``only`` when loading).
    ``kept`` None: that config no longer loads; its pipelines are those the resume recorded for
    ``incarnation`` (review F1: the left-out ones are still told, and read from their own configs)."""
    if run_id is None:          # a run from before revision 0011: its results do not say their run
        return []
    r, p = s.job_results.c, s.pipelines.c
    if kept is None:
        kept = set(conn.execute(select(p.pipeline_id).where(and_(
            p.job_id == job_id, p.incarnation == incarnation))).scalars())
    first = (conn.execute(select(func.max(r.incarnation)).where(and_(
        r.job_id == job_id, r.incarnation < incarnation, or_(r.run_id.is_(None), r.run_id != run_id)))).scalar()
        or 0) + 1
    last_ran = dict(conn.execute(select(p.pipeline_id, func.max(p.incarnation)).where(and_(
        p.job_id == job_id, p.incarnation >= first, p.incarnation <= incarnation, p.checkpoint_dir != ""))
        .group_by(p.pipeline_id)).all())
    left = {pid: until for pid, until in last_ran.items() if pid not in kept}
    if not left:
        return []
    results = conn.execute(select(r.incarnation, r.config, r.variables).where(and_(
        r.job_id == job_id, r.run_id == run_id, r.incarnation >= first, r.incarnation < incarnation,
        r.config.is_not(None))).order_by(r.incarnation.desc())).all()
    found: dict[int, LeftOutConfig] = {}
    for pid, until in sorted(left.items()):
        newest = next((row for row in results if row.incarnation <= until), None)
        if newest is None:
            continue
        entry = found.get(newest.incarnation)
        ids = (entry.pipeline_ids if entry else frozenset()) | {pid}
        found[newest.incarnation] = LeftOutConfig(newest.incarnation, newest.config, newest.variables, ids)
    return [found[incarnation] for incarnation in sorted(found, reverse=True)]


def unloadable_note(key: str, then: LeftOutConfig, reason: str, holds: list[str]) -> str:
    """What the watch's error row and the release's warning say of left-out pipelines whose config no longer loads:
    SeaTide cannot tell their sources, so it neither measures nor drops what they hold; the operator can."""
    from seatide.connectors.postgres_cdc.slot import job_prefix

    pattern = job_prefix(key).replace("_", "\\_")      # LIKE's _ is any character
    them = ", ".join(map(str, sorted(then.pipeline_ids)))
    one = f"{next(iter(then.pipeline_ids))}\\_" if len(then.pipeline_ids) == 1 else ""
    known = f"last seen holding {', '.join(sorted(holds))}" if holds else "what it holds was never measured"
    return (f"pipeline {them}, left out by the current config, last ran in incarnation {then.incarnation}, whose "
            f"config no longer loads ({reason}): its sources are neither measured nor released by SeaTide ({known}). "
            f"A Postgres-CDC source's replication slot keeps retaining WAL: drop it on the source database, e.g. "
            f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE "
            f"'{pattern}{one}%' "
            "(or its slot.name)")


__all__ = ["LeftOutConfig", "left_out_configs", "unloadable_note"]
