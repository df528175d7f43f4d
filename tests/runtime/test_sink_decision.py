"""The sink commit decision (issue 9 item 1): one attempt-fenced store write per batch, on both
stores. What a sink does around it (zombies held at every step, replays, roll-forward) is the
sink contract suite's (tests/contract/test_sinks.py)."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from seatide.runtime.reporter import AttemptReporter
from seatide.store import schema as s
from seatide.store.db import AttemptFenced, open_store
from seatide.store.jobs import forget_job
from tests.contract.harness import new_attempt, submit

SINK = "sink[0]"


@pytest.fixture
def store(store_url):
    st = open_store(store_url)
    yield st
    st.dispose()


def manifests(store) -> list:
    with store.read() as conn:
        return conn.execute(select(s.sink_manifests).where(s.sink_manifests.c.batch_id >= 0)   # batches' only
                            .order_by(s.sink_manifests.c.batch_id)).all()


def test_only_the_current_attempt_decides_and_the_first_decision_stands(store, tmp_path):
    submit(store, tmp_path)
    first = AttemptReporter(store, "j1", 1, new_attempt(store, "j1", 1))
    decided = first.decide_batch(1, SINK, 0, "T0", {"publish": {"moves": []}, "state": {"rows": 1}})
    assert decided["state"] == {"rows": 1}
    # a retry of the same decision (the driver's write was in doubt) keeps the first one
    assert first.decide_batch(1, SINK, 0, "T0", {"publish": {}, "state": {"rows": 9}})["state"] == {"rows": 1}
    second = AttemptReporter(store, "j1", 1, new_attempt(store, "j1", 2))
    with pytest.raises(AttemptFenced):
        first.decide_batch(1, SINK, 1, "T1", {"publish": {}, "state": {"rows": 2}})
    assert [(m.batch_id, m.status) for m in manifests(store)] == [(0, "DECIDED")]
    # the replacement finds the decided batch to roll forward, and marks it published
    assert [b for b, _, _ in second.unpublished_manifests(1, SINK, "T")] == [0]
    second.batch_published(1, SINK, "T0")
    assert [(m.batch_id, m.status) for m in manifests(store)] == [(0, "PUBLISHED")]
    with store.write() as conn:
        forget_job(conn, "j1", 1)
    assert manifests(store) == []
