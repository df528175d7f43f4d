"""A job name recorded in clear by a SeaTide from before submit masked names is masked by the upgrade (0020),
so /metrics' job_name labels, which read the stored name and no config, show no secret."""

from __future__ import annotations

from sqlalchemy import select, text, update

from seatide import intents
from seatide.store import schema as s
from seatide.store.db import open_store
from seatide.store.migrations import head
from tests.store.older_lease import lease_as_before

JOB = """
env { job.mode = BATCH, job.name = "nightly-${tenant}", secret.variables = [tenant] }
source { FakeSource { row.num = 1, schema = { fields { id = bigint } } } }
sink { Console {} }
"""


def _names(store) -> dict[str, str]:
    with store.read() as conn:
        return dict(conn.execute(select(s.jobs.c.job_id, s.jobs.c.name)).all())


def test_an_upgrade_masks_a_name_recorded_in_clear_and_keeps_a_plain_one(store_url, tmp_path):
    store = open_store(store_url)
    intents.submit(store, str(tmp_path), text=JOB, variables={"tenant": "ACME-7731"}, job_id="secret", actor="test")
    intents.submit(store, str(tmp_path), text=JOB.replace("${tenant}", "eu"), job_id="plain", actor="test")
    assert _names(store) == {"secret": "nightly-******", "plain": "nightly-eu"}
    # As a SeaTide before masked names left it: the name in clear, the schema one revision older.
    with store.write() as conn:
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "secret").values(name="nightly-ACME-7731"))
        conn.execute(text("ALTER TABLE nodes DROP COLUMN features"))     # revision 0021's
        lease_as_before(conn)                                            # revision 0022's
        conn.execute(text("UPDATE alembic_version SET version_num = '0019'"))
    store.dispose()

    store = open_store(store_url)
    try:
        with store.read() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == head()
        assert _names(store) == {"secret": "nightly-******", "plain": "nightly-eu"}
    finally:
        store.dispose()
