"""A zombie driver never moves its replacement's checkpoint aside (issue 30, finding 16).

A resumed pipeline's driver sets the old checkpoint directory aside and renames its staged
copy into place (``runtime/checkpoint_move.py``). Its only fence was before it began. Here
a real driver process (the zombie) stages, then is held by a failpoint right before the
set-aside; the leader replaces its attempt; the replacement prepares the directory and starts
using it; the zombie goes on. Before, it renamed the replacement's live directory aside (and
then failed: the shared staging copy was gone), so the replacement ran on without it.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from seatide.runtime.driver import _prepare_checkpoint
from seatide.runtime.reporter import AttemptReporter
from seatide.store.db import open_store
from seatide.testing.cluster import open_gate, wait_for
from tests.contract.harness import new_attempt, submit
from tests.store.test_owed_prepare import _released_then_resumed_fresh, leader  # noqa: F401 (a fixture)

ZOMBIE = """
import sys
from types import SimpleNamespace
from seatide.runtime.driver import _prepare_checkpoint
from seatide.runtime.reporter import AttemptReporter
from seatide.store.db import AttemptFenced, open_store

url, attempt, directory = sys.argv[1], int(sys.argv[2]), sys.argv[3]
reporter = AttemptReporter(open_store(url), "j1", 1, attempt)
try:
    _prepare_checkpoint(reporter, SimpleNamespace(pipeline_id=1, checkpoint_dir=directory), 1, None)
except AttemptFenced as exc:
    print("fenced:", exc)
    sys.exit(3)
print("moved")
"""


@pytest.fixture
def store(store_url):
    st = open_store(store_url)
    yield st
    st.dispose()


def test_a_zombie_held_before_the_set_aside_leaves_its_replacements_directory_alone(store, store_url, tmp_path):
    submit(store, tmp_path)
    live = str(tmp_path / "run" / "1")
    os.makedirs(live)
    open(os.path.join(live, "old-checkpoint"), "w").close()       # what the resume starts over from
    gate = str(tmp_path / "gate")
    zombie_attempt = new_attempt(store, "j1", 1)
    zombie = subprocess.Popen([sys.executable, "-c", ZOMBIE, store.url, str(zombie_attempt), live],
                              env={**os.environ, "SEATIDE_FAILPOINTS": f"driver.checkpoint_staged=gate:0:{gate}"},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: glob.glob(f"{live}.restoring-*/seatide-restore.json"), 60,
                 message="the zombie's staged copy (it is held right after it)")
        # The leader replaces it; the replacement prepares the directory and runs on it.
        replacement = AttemptReporter(store, "j1", 1, new_attempt(store, "j1", 2))
        _prepare_checkpoint(replacement, SimpleNamespace(pipeline_id=1, checkpoint_dir=live), 1, None)
        open(os.path.join(live, "replacement-batch"), "w").close()
        open_gate(gate)
        output, _ = zombie.communicate(timeout=120)
    finally:
        open_gate(gate)
        if zombie.poll() is None:
            zombie.kill()
    assert os.path.exists(os.path.join(live, "replacement-batch")), (
        f"the replacement's checkpoint directory was moved by the zombie: {sorted(os.listdir(tmp_path / 'run'))}; "
        f"zombie: {output.strip().splitlines()[-1:]}")
    assert zombie.returncode == 3 and "fenced:" in output, output
    run = sorted(os.listdir(tmp_path / "run"))
    assert [n for n in run if ".discarded-" in n] and not [n for n in run if ".restoring-" in n], run


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_the_set_aside_is_named_by_the_stores_clock(store, tmp_path):
    """Retention prunes set-aside directories by the time in their name, on the store's clock
    (issue 30, finding 17): the name carries the store's time, not this host's. The store's
    clock is a day behind this host's here (the simulation's store clock, on SQLite)."""
    from seatide import clock
    from seatide.runtime.checkpoint_move import prepare_checkpoint

    submit(store, tmp_path)
    live = str(tmp_path / "run" / "1")
    os.makedirs(live)
    reporter = AttemptReporter(store, "j1", 1, new_attempt(store, "j1", 1))
    clock.use_store_clock(lambda: time.time() - 86400)
    try:
        set_aside = prepare_checkpoint(live, 1, None, reporter.attempt_id, reporter.fence)["set_aside"]
    finally:
        clock.use_store_clock(None)
    stamp = int(set_aside.rsplit("-", 1)[1]) / 1000
    assert abs(stamp - (time.time() - 86400)) < 60, f"named {time.time() - stamp:.0f} s before this host's now"


@pytest.mark.cluster        # a driver process of its own
@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_resumed_pipelines_checkpoint_is_put_in_place_while_spark_starts(leader, tmp_path):
    """The incarnation's driver does the resume's move (a savepoint's copy: seconds for a large
    state) while its Spark starts, not after it: a driver whose JVM never comes up (no java where
    JAVA_HOME says) has put the checkpoint in place all the same. Before, the move waited for Spark,
    and a driver killed at it (tests/cluster/test_checkpoints.py) had spent a whole JVM start."""
    from sqlalchemy import insert, update

    from seatide.runtime.session import JVM_STARTING, SPARK_CONF_ENV
    from seatide.store import schema as s
    from seatide.store.runs import prepared_for

    _, store, directory = _released_then_resumed_fresh(leader, tmp_path)     # incarnation 2: start over
    with store.write() as conn:
        attempt = conn.execute(insert(s.attempts).values(
            job_id="j1", incarnation=2, number=1, worker_id="w", state="LAUNCHING", created_at=time.time(),
            kill_requested=False)).inserted_primary_key[0]
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(current_attempt=attempt))
    done = subprocess.run([sys.executable, "-m", "seatide.runtime.driver", "driver", "--store", store.url,
                           "--job-id", "j1", "--attempt", str(attempt), "--heartbeat-interval", "0.2"],
                          env={**os.environ, SPARK_CONF_ENV: "{}", "JAVA_HOME": str(tmp_path / "no-java")},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode != 0 and JVM_STARTING in done.stderr, done.stderr[-3000:]     # Spark was started, and failed
    assert prepared_for(directory) == 2, done.stderr[-3000:]
    assert [n for n in os.listdir(os.path.dirname(directory)) if ".discarded-" in n], os.listdir(tmp_path)
