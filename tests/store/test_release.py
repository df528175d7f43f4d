"""Long-running CDC in the store: cancel and release, what a released job may still do, and what the
leader's measurements of its sources show (coordinator/release.py, coordinator/source_watch.py).

The sources here hold nothing (a file source): the decisions and records are the subject; the
slot a Postgres-CDC source drops is tested with real servers in tests/databases/test_cdc_release.py.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select, update

from seatide.api.metrics import CoordinatorMetrics
from seatide.config.loader import load_job_text
from seatide.coordinator.lease import LeaderLease
from seatide.coordinator.release import Releaser, due_releases
from seatide.coordinator.source_watch import Measured, record_measurements
from seatide.plan.dag import build_plan
from seatide.store import schema as s
from seatide.store.job_ids import JobRefused
from seatide.store.jobs import request_stop
from seatide.store.restore import RestoreRefused, resume_job
from seatide.store.views import job_info
from tests.leader import elected
from tests.store.test_store import JOB, _end, store, submit  # noqa: F401  (store is a fixture)


def _job(store, job_id: str = "j1"):
    with store.read() as conn:
        return conn.execute(select(s.jobs).where(s.jobs.c.job_id == job_id)).one()


def _kinds(store, job_id: str = "j1") -> list[str]:
    with store.read() as conn:
        return [e.kind for e in conn.execute(select(s.events).where(s.events.c.job_id == job_id)
                                             .order_by(s.events.c.seq))]


def _resume(store, fallback=None):
    return resume_job(store, "j1", plan=build_plan(load_job_text(JOB)), text=JOB, variables={}, fallback=fallback)


def _leader(store) -> LeaderLease:
    return elected(store, "c1")


def test_cancel_and_release_is_asked_of_a_running_or_stopped_job_never_a_finished_one(store, tmp_path):
    submit(store, tmp_path)
    with pytest.raises(JobRefused, match="savepoint"):
        request_stop(store, "j1", savepoint=True, release=True)
    assert request_stop(store, "j1", release=True) == "CREATED"
    job = _job(store)
    assert (job.desired, job.release) == ("CANCEL", "REQUESTED")
    assert _kinds(store)[-2:] == ["STOP_REQUESTED", "RELEASE_REQUESTED"]
    _end(store, "j1", "FINISHED", "DIRTY")
    with pytest.raises(JobRefused, match="FINISHED"):
        request_stop(store, "j1", release=True)


def test_the_leader_releases_once_the_job_has_ended_and_then_it_resumes_only_fresh(store, tmp_path):
    submit(store, tmp_path)
    request_stop(store, "j1", release=True)
    assert due_releases(store) == []            # still to be cancelled: nothing is dropped under a driver
    _end(store, "j1", "CANCELED", "CLEAN")
    with pytest.raises(RestoreRefused, match="--fallback fresh"):
        _resume(store)                          # asked, not yet done: the position is given up already
    lease = _leader(store)
    [due] = due_releases(store)
    Releaser(store, "coordinator:c1").step(lease.epoch, due, 0.0)
    job = _job(store)
    assert job.release == "RELEASED" and job.released_at is not None
    assert _kinds(store)[-2:] == ["RELEASE_DECIDED", "SOURCES_RELEASED"]
    assert due_releases(store) == []
    with store.read() as conn:
        assert job_info(conn, "j1")["release"]["state"] == "RELEASED"
    with pytest.raises(RestoreRefused, match="released") as refused:
        _resume(store)
    assert "seatide resume j1 --fallback fresh" in str(refused.value)
    _resume(store, fallback="fresh")
    job = _job(store)
    assert (job.incarnation, job.status, job.release, job.released_at) == (2, "CREATED", None, None)
    assert json.loads(job.restore)["fresh"] and "RESTORE_FALLBACK_FRESH" in _kinds(store)


def test_a_resume_before_the_leader_decides_overrules_the_release(store, tmp_path):
    submit(store, tmp_path)
    _end(store, "j1", "FAILED", "CLEAN")
    request_stop(store, "j1", release=True)      # an ended job: the release alone
    [due] = due_releases(store)
    _resume(store, fallback="fresh")
    Releaser(store, "coordinator:c1").step(_leader(store).epoch, due, 0.0)   # a decision read before the resume
    job = _job(store)
    assert (job.incarnation, job.release) == (2, None)
    assert "RELEASE_DECIDED" not in _kinds(store)


def test_a_resume_after_the_leader_decided_waits_for_the_release(store, tmp_path):
    submit(store, tmp_path)
    _end(store, "j1", "CANCELED", "CLEAN")
    request_stop(store, "j1", release=True)
    with store.write() as conn:
        conn.execute(update(s.jobs).values(release="RELEASING"))
    with pytest.raises(JobRefused, match="being released"):
        _resume(store, fallback="fresh")


def test_measurements_warn_once_past_the_threshold_and_show_in_job_info_and_metrics(store, tmp_path):
    submit(store, tmp_path)
    job, epoch = _job(store), _leader(store).epoch

    def measure(size=None, error=None):
        return record_measurements(store, epoch, "coordinator:c1", job, [Measured(
            1, "source[0]", "Postgres-CDC", "seatide_j1_1_source0" if error is None else None, size,
            state="reserved" if error is None else None, error=error)], warn_bytes=1000)

    assert measure(500) == []
    assert len(measure(1500)) == 1 and measure(2500) == []     # one warning as it crosses, not one a pass
    assert measure(error="OperationalError: connection refused") == []
    with store.read() as conn:
        [held] = job_info(conn, "j1")["retained"]
    assert (held["holds"], held["retainedBytes"], held["warning"]) == ("seatide_j1_1_source0", 2500, True)
    assert held["error"].startswith("OperationalError")          # the last figures stay, with why they are old
    assert _kinds(store).count("SOURCE_RETAINED_WARNING") == 1
    text = CoordinatorMetrics(store, "c1").exposition(None)[0].decode()
    assert 'seatide_source_retained_bytes{connector="Postgres-CDC",job_id="j1",job_name="SeaTide",pipeline="1",' \
           'source="source[0]"} 2500.0' in text
    assert 'seatide_source_retained_warning{connector="Postgres-CDC",job_id="j1",job_name="SeaTide",' \
           'pipeline="1",source="source[0]"} 1.0' in text
    measure(10)
    with store.read() as conn:
        assert job_info(conn, "j1")["retainedWarning"] is False


def test_a_mysql_source_is_measured_from_its_pipelines_newest_checkpoint_of_any_incarnation(store, tmp_path):
    import time

    from sqlalchemy import insert

    from seatide.coordinator.source_watch import newest_offset

    submit(store, tmp_path)
    with store.write() as conn:
        for checkpoint_id, incarnation, pipeline, kind, offsets in [
                (1, 1, 1, "CHECKPOINT", {"batch": 0, "sources": [{"phase": "binlog", "file": "b.000001", "pos": 4}]}),
                (2, 1, 1, "CHECKPOINT", {"batch": 1, "sources": [{"phase": "binlog", "file": "b.000002", "pos": 9}]}),
                (3, 1, 0, "SAVEPOINT", {"pipelines": {"1": {}}}),           # a savepoint covers them all: not this
                (4, 1, 2, "CHECKPOINT", {"batch": 7, "sources": [None]})]:  # another pipeline
            conn.execute(insert(s.checkpoints).values(
                job_id="j1", incarnation=incarnation, checkpoint_id=checkpoint_id, pipeline_id=pipeline, batch_id=0,
                kind=kind, status="COMPLETED", created_at=time.time(), duration_ms=1, rows=0,
                source_offsets=json.dumps(offsets), fingerprint="f", attempt_id=1))
    with store.read() as conn:
        assert newest_offset(conn, "j1", 1, 0) == {"phase": "binlog", "file": "b.000002", "pos": 9}
        assert newest_offset(conn, "j1", 2, 0) is None and newest_offset(conn, "j1", 3, 0) is None
        assert newest_offset(conn, "j1", 1, 1) is None


def _config_now(store, text: str) -> None:
    """The stored config as a later SeaTide reads it (a plugin of it taken out by an upgrade, say)."""
    with store.write() as conn:
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(config=text))


def test_a_release_whose_config_no_longer_loads_is_not_recorded_as_done(store, tmp_path):
    """Review 30, F5: the release logged a warning and recorded RELEASED (and dropped the job's
    ``source_holds``) while the slot stayed on the source server, retaining WAL unwatched."""
    submit(store, tmp_path)
    request_stop(store, "j1", release=True)
    _end(store, "j1", "CANCELED", "CLEAN")
    with store.write() as conn:
        conn.execute(s.source_holds.insert().values(job_id="j1", pipeline_id=1, plugin_id="source[0]", incarnation=1,
                                                    connector="PostgresCDC", holds="seatide_j1_1_source0",
                                                    measured_at=0.0))
    _config_now(store, 'source { GoneCdc { slot.name = "s" } }\nsink { Console {} }')
    lease = _leader(store)
    [due] = due_releases(store)
    Releaser(store, "coordinator:c1").step(lease.epoch, due, 0.0)
    assert _job(store).release == "RELEASING"
    with store.read() as conn:
        retry = conn.execute(select(s.events).where(s.events.c.job_id == "j1").order_by(s.events.c.seq.desc())).first()
        assert conn.execute(select(s.source_holds)).all(), "the job's holds were dropped as if released"
    assert retry.kind == "RELEASE_RETRY", _kinds(store)
    error = json.loads(retry.detail)["error"]
    assert "no longer loads" in error and "GoneCdc" in error and "pg_drop_replication_slot" in error, error


def test_a_release_whose_config_no_longer_loads_but_whose_sources_hold_nothing_is_done(store, tmp_path):
    submit(store, tmp_path)
    request_stop(store, "j1", release=True)
    _end(store, "j1", "CANCELED", "CLEAN")
    _config_now(store, 'source { LocalFile { path = "/tmp/in", file_format_type = "parquet" } }\nsink { GoneSink {} }')
    lease = _leader(store)
    [due] = due_releases(store)
    Releaser(store, "coordinator:c1").step(lease.epoch, due, 0.0)
    assert _job(store).release == "RELEASED"


def test_an_expiry_whose_config_no_longer_loads_keeps_the_run_and_says_so(store, tmp_path):
    """The expiry's side of F5: it went on to forget the run (its rows, its holds) with the slot left."""
    from seatide.coordinator.cleanup import due_results, reconcile_cleanup

    submit(store, tmp_path)
    _end(store, "j1", "CANCELED", "CLEAN")
    _config_now(store, 'source { GoneCdc { slot.name = "s" } }\nsink { Console {} }')
    with store.write() as conn:
        conn.execute(update(s.job_results).values(expires_at=0.0))
    lease = _leader(store)
    [due] = due_results(store, 1.0)
    reconcile_cleanup(store, lease.epoch, "coordinator:c1", due, kill_attempt=lambda attempt: None)
    with store.read() as conn:
        retry = conn.execute(select(s.events).where(s.events.c.kind == "CLEANUP_RETRY")).one()
    assert _job(store).job_id == "j1", "the run was forgotten"
    assert "no longer loads" in json.loads(retry.detail)["error"], retry.detail
