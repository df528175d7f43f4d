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
                     kept: set[int] | frozenset[int]) -> list[LeftOutConfig]:
    """For the pipelines the run had up to ``incarnation`` and ``kept`` (its config's pipeline ids)
    lacks: the config of the newest incarnation of the run, no later than where each last ran,
    whose result is still stored (one resumed before it ended has none: an earlier one names it).
    Whether that config has the pipeline is for its loader to say (``only`` when loading)."""
    if run_id is None:          # a run from before revision 0011: its results do not say their run
        return []
    r, p = s.job_results.c, s.pipelines.c
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


__all__ = ["LeftOutConfig", "left_out_configs"]
