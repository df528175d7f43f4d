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
