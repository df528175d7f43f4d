"""A pipeline a resume leaves out on purpose (``--fallback fresh``, store/left_out.py) keeps its checkpoint, and its
Postgres-CDC source keeps its replication slot, which retains WAL for as long as it exists. Outside review (open):
the leader's watch read the sources from the job's current config only, and the release from the run's config
only, so that slot was neither measured nor warned of, nor ever dropped. Now the sources of the pipelines left out
are read from the incarnation where they last ran (its ``job_results`` config): measured, marked as left out, and
released through the same door. A real slot on a private PostgreSQL server; the leader's steps driven in-process."""

from __future__ import annotations

import time

from sqlalchemy import select, update

from seatide.config.loader import load_job_text
from seatide.connectors.postgres_cdc import slot
from seatide.coordinator.cleanup import due_results, reconcile_cleanup
from seatide.coordinator.release import RELEASING, Releaser, due_releases
from seatide.coordinator.source_watch import SourceWatch
from seatide.plan.dag import build_plan
from seatide.store import schema as s
from seatide.store.restore import resume_job
from seatide.store.runs import run_key
from tests.coordinator.test_stale_leader import _leader, _make_slot, _slots
from tests.store.test_store import store, submit  # noqa: F401  (store is a fixture)

LOCAL = 'LocalFile { plugin_output = "a", path = "/tmp/in_a", file_format_type = "parquet" }'


def _two(server) -> str:
    """Pipeline 1 reads files; pipeline 2 reads a table's changes through a slot SeaTide names."""
    return f"""env {{ checkpoint.interval = 1000 }}
source {{
  {LOCAL}
  Postgres-CDC {{ plugin_output = "b", base-url = "{server.url}", username = "postgres", password = "",
                 table-names = ["postgres.public.left_out_slot"] }}
}}
sink {{
  Console {{ plugin_input = "a" }}
  Console {{ plugin_input = "b" }}
}}
"""


ONE = f"""env {{ checkpoint.interval = 1000 }}
source {{ {LOCAL} }}
sink {{ Console {{ plugin_input = "a" }} }}
"""


def _job(store):
    with store.read() as conn:
        return conn.execute(select(s.jobs).where(s.jobs.c.job_id == "j1")).one()


def _end(store, status: str = "CANCELED", cleanup: str = "CLEAN") -> None:
    """The incarnation ends as the leader records it: its result keeps its config."""
    job, now = _job(store), time.time()
    with store.write() as conn:
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(status=status, finished_at=now))
        conn.execute(s.job_results.insert().values(
            job_id="j1", incarnation=job.incarnation, run_id=job.run_id, config=job.config, variables=job.variables,
            status=status, cleanup=cleanup, cleanup_due_at=now, cleanup_tries=0, next_cleanup_at=now,
            expires_at=now + 3600, created_at=now))


def _resume(store, text: str) -> None:
    resume_job(store, "j1", plan=build_plan(load_job_text(text)), text=text, variables={}, fallback="fresh")


def _left_out_slot(store, server, tmp_path) -> str:
    """j1 ran both pipelines, then was resumed leaving pipeline 2 out; pipeline 2's slot is on the server."""
    submit(store, tmp_path, text=_two(server))
    [spec] = [p.sources[0] for p in build_plan(load_job_text(_two(server))).pipelines if p.pipeline_id == 2]
    name = slot.default_name(run_key("j1", _job(store).run_id), 2, spec.plugin_id)
    for leftover in _slots(server, slot.job_prefix(run_key("j1", _job(store).run_id))):   # a twin's
        with server.connect() as conn:
            slot.drop(conn, leftover)
    _make_slot(server, name)
    _end(store)
    _resume(store, ONE)
    return name


def _holds(store) -> list:
    with store.read() as conn:
        return conn.execute(select(s.source_holds).where(s.source_holds.c.job_id == "j1")
                            .order_by(s.source_holds.c.pipeline_id)).all()


def test_the_slot_of_a_pipeline_left_out_is_watched_and_marked(store, tmp_path, private_postgres):
    name = _left_out_slot(store, private_postgres, tmp_path)
    try:
        lease = _leader(store, "c1")
        SourceWatch(store, lambda: lease.epoch, "coordinator:c1").run(lease.epoch)
        [held] = _holds(store)
        assert (held.pipeline_id, held.holds, held.left_out) == (2, name, True), held
        assert held.retained_bytes is not None and held.error is None, held
        from seatide.store.views import source_holds
        with store.read() as conn:
            [shown] = source_holds(conn, _job(store))["retained"]
        assert shown["leftOut"] is True and shown["holds"] == name, shown
        from seatide.cli.client import retained_lines
        assert "(pipeline 2, left out by the current config)" in retained_lines({"retained": [shown], "jobId": "j1"})[0]
        # brought back by a later resume: watched from the current config again, one row, not marked
        _end(store)
        _resume(store, _two(private_postgres))
        SourceWatch(store, lambda: lease.epoch, "coordinator:c1").run(lease.epoch)
        [held] = _holds(store)
        assert (held.pipeline_id, held.holds, held.left_out) == (2, name, False), held
    finally:
        with private_postgres.connect() as conn:
            slot.drop(conn, name)


def _release(store, epoch: int) -> None:
    """The job is cancelled with --release, and the leader takes one release step."""
    with store.write() as conn:
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(release=RELEASING))
    [due] = due_releases(store)
    Releaser(store, "coordinator:c1").step(epoch, due, 0.0)


def _first_expiring(store):
    """Incarnation 1's history is due to expire, its left-out pipeline's checkpoint directory on disk:
    (that directory, the leader's lease, the due result)."""
    import os

    with store.read() as conn:
        kept = conn.execute(select(s.pipelines.c.checkpoint_dir).where(
            s.pipelines.c.incarnation == 1, s.pipelines.c.pipeline_id == 2)).scalar()
    os.makedirs(kept, exist_ok=True)
    with store.write() as conn:
        conn.execute(update(s.job_results).where(s.job_results.c.incarnation == 1).values(expires_at=0.0))
    lease = _leader(store, "c1")
    [expiring] = [r for r in due_results(store, time.time()) if r.incarnation == 1]
    return kept, lease, expiring


def test_a_release_drops_the_slot_of_a_pipeline_left_out(store, tmp_path, private_postgres):
    name = _left_out_slot(store, private_postgres, tmp_path)
    _end(store)
    _release(store, _leader(store, "c1").epoch)
    assert _job(store).release == "RELEASED"
    assert _slots(private_postgres, name) == [], "the release left the left-out pipeline's slot retaining WAL"


def test_the_history_expiry_drops_the_slot_of_a_pipeline_left_out(store, tmp_path, private_postgres):
    name = _left_out_slot(store, private_postgres, tmp_path)
    _end(store)
    with store.write() as conn:         # the current incarnation's history expires (the earlier one's first)
        conn.execute(update(s.job_results).where(s.job_results.c.incarnation == 2).values(expires_at=0.0))
    lease = _leader(store, "c1")
    [expiring] = [r for r in due_results(store, time.time()) if r.incarnation == 2]
    reconcile_cleanup(store, lease.epoch, "coordinator:c1", expiring, [].append)
    with store.read() as conn:
        assert conn.execute(select(s.jobs.c.job_id)).all() == [], "the run did expire"
    assert _slots(private_postgres, name) == [], "the expiry left the left-out pipeline's slot retaining WAL"


def test_the_expiry_of_the_incarnation_where_it_last_ran_keeps_what_a_pipeline_left_out_needs(
        store, tmp_path, private_postgres):
    """The earlier incarnation's history expires first (it ended first): its expiry removed the checkpoint
    directories the current incarnation does not have, the left-out pipeline's among them, and forgot the
    only config that names its source. Both stay while the pipeline is left out; the slot stays watched."""
    import os

    name = _left_out_slot(store, private_postgres, tmp_path)
    try:
        kept, lease, expiring = _first_expiring(store)
        reconcile_cleanup(store, lease.epoch, "coordinator:c1", expiring, [].append)
        assert os.path.isdir(kept), "the expiry removed the left-out pipeline's checkpoint"
        assert [r.incarnation for r in due_results(store, time.time())] == [], "kept, and not due again at once"
        SourceWatch(store, lambda: lease.epoch, "coordinator:c1").run(lease.epoch)
        assert [(h.pipeline_id, h.holds, h.left_out) for h in _holds(store)] == [(2, name, True)]
    finally:
        with private_postgres.connect() as conn:
            slot.drop(conn, name)
