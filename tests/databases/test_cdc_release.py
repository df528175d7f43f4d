"""A CDC job that runs for months: what a stopped job's replication slot keeps on the server, the
warning past a threshold, and "cancel and release" (docs/operations.md, "Long-running CDC").

One scenario on a real cluster (coordinator, worker, drivers) with a private PostgreSQL as the
source and the machine's MariaDB as the target: cancelled, the job's slot retains WAL that grows
as the server writes, shown in job-info (REST and CLI) and /metrics, with a warning past a
small threshold; `seatide cancel --release` drops the slot at once; a resume is refused, saying
to start fresh; `--fallback fresh` snapshots again; a running job cancelled with release (`seatunnel.sh -can
JOB --release`) loses its slot as it ends.
"""

from __future__ import annotations

import urllib.request

import pytest

from seatide.testing.cluster import Cluster, http, wait_for
from tests.cli.test_local_run import seatide
from tests.cli.test_seatunnel_flags import seatunnel
from tests.databases.jobs import mariadb_connect
from tests.databases.test_cdc_jobs import postgres_to_mariadb  # noqa: F401  (a fixture)
from tests.stores import sqlite_only

pytestmark = pytest.mark.cluster


def _slots(server, job_id: str) -> list[str]:
    with server.connect() as conn:
        return [r[0] for r in conn.execute("SELECT slot_name FROM pg_replication_slots").fetchall()
                if r[0].startswith(f"seatide_{job_id}")]


def _retained(cluster: Cluster, job_id: str) -> dict | None:
    rows = cluster.job_info(job_id).get("retained") or []
    return rows[0] if rows and rows[0]["retainedBytes"] is not None else None


@sqlite_only
def test_a_cancelled_jobs_slot_is_shown_warned_about_and_released(cluster: Cluster, private_postgres,
                                                                    postgres_to_mariadb):  # noqa: F811
    job, table, replica = postgres_to_mariadb
    coordinator = cluster.coordinator("c1", extra=["--retained-warn", "2MiB", "--retained-check-interval", "0.5"])
    cluster.worker("w1")
    url = coordinator.url
    cluster.submit(job, "hold")
    wait_for(replica.same, 240, message="the snapshot copied")
    cluster.cancel("hold")
    cluster.wait_status("hold", "CANCELED", timeout=90)
    slot = _slots(private_postgres, "hold")
    assert len(slot) == 1

    # Cancelled, the slot keeps the WAL written since: the retained size grows, and past 2 MiB it warns.
    first = wait_for(lambda: _retained(cluster, "hold"), 30, message="a first measurement")
    assert first["holds"] == slot[0] and first["connector"] == "Postgres-CDC"
    assert first["warning"] == (first["retainedBytes"] >= 2 * 2**20)
    replica.apply("SELECT pg_logical_emit_message(false, 'seatide-test', repeat('w', 3000000))",
                  f"INSERT INTO {table} VALUES (1000, 'after the cancel', 1)")
    grown = wait_for(lambda: (lambda r: r if r and r["warning"] else None)(_retained(cluster, "hold")), 30,
                     message="the warning past 2 MiB")
    assert grown["retainedBytes"] >= first["retainedBytes"] + 2 * 2**20, (first, grown)
    assert cluster.job_info("hold")["retainedWarning"] is True
    warnings = [e for e in cluster.events("hold") if e.kind == "SOURCE_RETAINED_WARNING"]
    assert len(warnings) == 1 and slot[0] in warnings[0].detail
    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        text = response.read().decode()
    assert 'seatide_source_retained_bytes{connector="Postgres-CDC",job_id="hold"' in text
    assert 'seatide_source_retained_warning{connector="Postgres-CDC",job_id="hold"' in text
    shown = seatide("job-info", "hold", "--cluster", url)
    assert shown.returncode == 0 and slot[0] in shown.stdout and "WARNING" in shown.stdout, shown.stdout

    # Cancel and release: the slot goes at once, the job says so, a resume is refused.
    released = seatide("cancel", "hold", "--release", "--cluster", url)
    assert released.returncode == 0, released.stderr
    assert "only start fresh" in released.stdout
    wait_for(lambda: not _slots(private_postgres, "hold"), 30, message="the slot dropped")
    info = wait_for(lambda: (lambda i: i if (i.get("release") or {}).get("state") == "RELEASED" else None)(
        cluster.job_info("hold")), 30, message="the release recorded")
    assert info["retained"] == [] and info["jobStatus"] == "CANCELED"
    assert "SOURCES_RELEASED" in [e.kind for e in cluster.events("hold")]
    status, body = http("POST", url + "/api/v1/jobs/hold/resume", {})
    assert status == 409 and "--fallback fresh" in body["error"] and "released" in body["error"], body

    # Fresh: a new slot and a new snapshot (the target is emptied first, so only a snapshot refills it).
    with mariadb_connect() as db, db.cursor() as cur:
        cur.execute(f"DELETE FROM {table}")
    status, body = http("POST", url + "/api/v1/jobs/hold/resume", {"fallback": "fresh"})
    assert status == 200, body
    wait_for(replica.same, 240, message="the target refilled by a new snapshot")
    assert len(_slots(private_postgres, "hold")) == 1
    assert cluster.job_info("hold")["release"] is None

    # A running job cancelled with release, in SeaTunnel's CLI form: it ends, then its slot goes.
    cancelled = seatunnel("-can", "hold", "--release", "-cn", url)
    assert cancelled.returncode == 0 and cancelled.stdout == "hold CANCELED\n", cancelled.stderr
    wait_for(lambda: not _slots(private_postgres, "hold"), 60, message="the running job's slot dropped")
    assert cluster.job("hold").release in ("RELEASING", "RELEASED")
