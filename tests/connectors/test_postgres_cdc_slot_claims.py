"""Outside review rev3 (aa6b0a4..3f917a3), part B: slot.name ownership. Real slots on the private PostgreSQL; no
Spark. Each test FAILS on 3f917a3. Copied from the review; the first one's release is expected to fail
(NotReleased: the slot left, the release tried again with the fix) rather than pass quietly."""

from __future__ import annotations

import pytest
from psycopg import sql

from seatide.connectors.postgres_cdc import ownership, slot
from tests.connectors.test_postgres_cdc import cdc_source, shop  # noqa: F401
from tests.connectors.test_postgres_cdc_slot_owner import _started
from tests.connectors.test_postgres_cdc_slot_owner_review import refused_on_an_old_mark

A, B = "job-a.0123456789ab", "job-b.ba9876543210"


def test_a_resume_given_a_hand_made_slot_name_claims_it_and_its_release_drops_it(shop):  # noqa: F811
    """pg_recvlogical reads slot S through a publication S made by hand, without a comment (UNMARKED: 'not known').
    Job a ran on slot.name own and is resumed with slot.name = S (an edit, a copy-paste: review rev2 F6 is about
    such renames). S lags behind a's checkpoint, as any consumer slower than a does, so ownership.claim
    (ownership.py:153, asked by the resume's position check, source.py position_gone) marks S as a's run: the
    test 'confirmed_flush_lsn <= checkpoint' does not tell a's slot from another's. a's release then drops S. On
    aa6b0a4 such a publication was FOREIGN, never dropped."""
    conn, url, db = shop
    foreign = "rev3_recvlogical"
    conn.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE items").format(sql.Identifier(foreign)))
    conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (foreign,))
    a, end = _started(conn, url, db, A, "rev3_own")          # a's checkpoint: past the foreign slot's position
    a.stop()
    assert ownership.owner(conn, foreign).held is ownership.Held.UNMARKED
    before = slot.state(conn, foreign)
    source = cdc_source(url, f"{db}.public.items", f'slot.name = "{foreign}"')
    source.position_gone(A, 0, "source[0]", end, 5.0)        # resume's position check (coordinator/position_check.py)
    claimed = ownership.owner(conn, foreign)
    with pytest.raises(ownership.NotReleased) as left:     # job a ends for good: left, the release not done
        source.release(A, keep=frozenset(), within_s=1.5)
    assert f"COMMENT ON PUBLICATION \"{foreign}\" IS 'not SeaTide''s'" in str(left.value), left.value
    assert slot.state(conn, foreign) == before, f"job a's release dropped pg_recvlogical's slot (mark: {claimed})"


def test_a_refused_jobs_release_drops_the_not_known_pre_upgrade_slot_it_was_refused_on(shop):  # noqa: F811
    """Job a (SeaTide before run marks: OLD_MARK) reads slot.name S from a deployment (store) this one does not see,
    or with a name built from pieces (keep misses it, docs/operations.md). Job b, a copy-paste, is refused at its
    fresh start: 'whose it is is not known ... may be another job's that still reads through it'. Then b's own
    release drops S: release_leaves (ownership.py:189) returns None for OLD unless keep names it."""
    conn, url, db = shop
    name = "rev3_old_mark"
    before, refused = refused_on_an_old_mark(shop, name, 7001)
    assert name in refused and "may be another job" in refused, refused
    cdc_source(url, f"{db}.public.items", f'slot.name = "{name}"').release(B, keep=frozenset(), within_s=1.5)
    assert slot.state(conn, name) == before, "job b's release dropped the slot it was refused on as 'not known'"
