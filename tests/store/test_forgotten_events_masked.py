"""A forgotten job's events, written unmasked by an older writer, show no secret: masked by key, no secret known.

Review 6, F2: once a job's row and result are gone with its history (``forget_job``), its events (the audit
trail) and what its releases left (RELEASE_LEFT_HELD, shown by the overview until settled) have no config to
take the run's secrets from. They were shown with the pair masking alone, which left the rest of a quoted
value (``password = "two words"``), a value after another key (``"why": "password=x"`` in the event's JSON,
whose ``why`` took the whole text as its value), ``PGPASSWORD=...`` and a private key's PEM block. Every
credential-named key's value is masked now, in texts and in the event's own keys. Both stores.
"""
from __future__ import annotations

import json

from seatide.coordinator.left_held_watch import look_at_left_held
from seatide.store.events import record_event
from seatide.store.jobs import forget_job
from seatide.store.views import job_events, overview
from tests.conftest import store_url  # noqa: F401  (a fixture)
from tests.leader import elected
from tests.store.test_store import store, submit  # noqa: F401  (a fixture)

# What each text held in clear: none of these may be shown.
SECRETS = ["Json-Pw-1", "Eq-Pw-2", "Tok-3", "Words-4", "Env-Pw-5", "Nested-Pw-6", "Pem-Body-7", "Ak-8", "Key-Pw-9",
           "Escaped-Pw-10", "Run-Pw-11"]
WHY = ('asked with {"password": "Json-Pw-1"} and password=Eq-Pw-2, token: Tok-3; '
       'password = "two Words-4"; credentials: {"user": "u", "password": "x, Nested-Pw-6"}; '
       'options Map(access_key -> Ak-8); sent {\\"password\\": \\"Escaped-Pw-10\\"}')
SETTLE = ("PGPASSWORD=Env-Pw-5 psql -h db -c \"SELECT pg_drop_replication_slot('left_slot')\"; its key file: "
          "-----BEGIN RSA PRIVATE KEY-----\nPem-Body-7\n-----END RSA PRIVATE KEY-----")


def _shown(store) -> str:
    with store.read() as conn:
        return json.dumps([overview(conn)["leftBehind"], job_events(conn, "j1")])


def test_a_forgotten_jobs_events_show_no_credential_named_value(store, tmp_path):
    submit(store, tmp_path, "j1")
    with store.write() as conn:
        record_event(conn, "RELEASE_LEFT_HELD", "coordinator:c0", "j1", 1, None, level="WARNING", run_id="r1",
                     source="source[0]", connector="Postgres-CDC", holds="left_slot", retainedBytes=1,
                     state="extended", lost=False, why=WHY, settle=SETTLE)
        record_event(conn, "ATTEMPT_FAILED", "worker:w0", "j1", 1, None, error=f"connect failed: {SETTLE}",
                     options={"user": "u", "password": "Key-Pw-9", "url": "jdbc:postgresql://db/x"},
                     db_password="Run-Pw-11")
        forget_job(conn, "j1", 1)
    for adopted in (False, True):        # as the event tells it; then as the row the leader's look makes of it
        if adopted:
            assert look_at_left_held(store, elected(store, "c1").epoch, "coordinator:c1", 2.0) == 0
        shown = _shown(store)
        assert [secret for secret in SECRETS if secret in shown] == [], shown
        with store.read() as conn:
            [left] = overview(conn)["leftBehind"]
            events = {e["kind"]: e["detail"] for e in job_events(conn, "j1")}
        # what is not a secret stays readable: the slot, the way to settle it, the names of what was masked
        assert left["holds"] == "left_slot" and "pg_drop_replication_slot('left_slot')" in left["settle"], left
        assert "asked with" in left["why"] and "PGPASSWORD=" in left["settle"], left
        failed = events["ATTEMPT_FAILED"]
        assert isinstance(failed, dict) and failed["options"]["user"] == "u", failed
        assert failed["options"]["url"] == "jdbc:postgresql://db/x" and failed["db_password"] == "******", failed
        assert events["RELEASE_LEFT_HELD"]["holds"] == "left_slot", events
