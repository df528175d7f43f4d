"""Outside review of e20cc14..8348a57, finding 4 (copied from /work/review/test_review_destroy_order.py): an
unreachable Hive metastore is the world in the way, retried, not a refusal of the job."""

from __future__ import annotations

import pytest


def test_an_unreachable_hive_metastore_is_transient():
    """Opening a Hive target (``destroys_ahead`` opens every target in ``check_sinks_ahead``) wraps the
    metastore's "no Hive metastore answers" into HiveSinkError, a PermanentError: a metastore restart
    fails the job for good, with every pipeline of it, instead of being retried."""
    from seatide.connectors.hive.target import HiveTarget
    from seatide.runtime.failures import describe_error

    with pytest.raises(Exception) as caught:
        HiveTarget("db.t", [], ["thrift://127.0.0.1:9"], "none", "APPEND_DATA")
    message, permanent = describe_error(caught.value)
    assert not permanent, message
    assert "no Hive metastore answers at thrift://127.0.0.1:9" in message, message

