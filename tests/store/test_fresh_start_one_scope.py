"""Every pipeline one fresh-start decision starts over makes its save modes under ONE scope (outside
review 8, F): the door's ``P_<run>~<began>`` (runtime/sink_runs.py), ``began`` kept in the directory's
mark by the driver that moves it (runtime/checkpoint_move.py, store/runs.py ``began_anew``).

Within one incarnation every attempt's driver marks its moves with the incarnation (runtime/driver.py
``prepare_checkpoints`` passes ``view.job.incarnation``): a driver killed between two moves is replaced
by an attempt of the same incarnation, whose marks say the same. A release's fresh start is carried on
by the next incarnation when its own driver never made a move (store/owed_moves.py): the move is made
then by an incarnation that decided nothing. Here: released, resumed fresh (incarnation 2, both
pipelines start over), its driver moves pipeline 1 and ends before pipeline 2's move; cancelled and
resumed (incarnation 3), which carries pipeline 2's fresh start on. Its mark said began 3, pipeline 1's
began 2: the two pipelines decided their shared target's save modes under two scopes (DROP_DATA
carried out twice, or refused over the first one's new rows).

The state is what the store, the leader and the driver's own move leave; no Spark runs. SQLite only.
"""

from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace

from sqlalchemy import insert, select, update

from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan
from seatide.runtime.driver import prepare_checkpoints
from seatide.runtime.reporter import AttemptReporter
from seatide.store import schema as s
from seatide.store.jobs import job_view
from seatide.store.restore import resume_job
from seatide.store.runs import began_anew
from seatide.testing.jobs import batch_job
from tests.store.test_owed_prepare import _cancel, _job, leader  # noqa: F401  leader
from tests.store.test_store import submit
from tests.stores import sqlite_only

pytestmark = sqlite_only


def _driver(store, only: int | None = None) -> None:
    """The current incarnation's driver (an attempt of its own) makes the resume's moves, of pipeline
    ``only`` when given (it ends before the others'); then its attempt ends."""
    job = _job(store)
    with store.write() as conn:
        attempt = conn.execute(insert(s.attempts).values(
            job_id="j1", incarnation=job.incarnation, number=1, worker_id="w", state="RUNNING",
            created_at=time.time(), kill_requested=False)).inserted_primary_key[0]
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(current_attempt=attempt))
    reporter = AttemptReporter(store, "j1", job.incarnation, attempt)
    view = reporter.read(lambda conn: job_view(conn, "j1"))
    if only is not None:
        view = SimpleNamespace(job=view.job, pipelines=[p for p in view.pipelines if p.pipeline_id == only])
    prepare_checkpoints(reporter, view)
    with store.write() as conn:
        conn.execute(update(s.attempts).where(s.attempts.c.attempt_id == attempt).values(state="FAILED"))


def test_pipelines_one_release_started_over_share_one_scope_when_a_later_incarnation_makes_a_move(leader, tmp_path):
    coordinator, store = leader
    text = batch_job(str(tmp_path / "out"), rows=900, pipelines=2)
    submit(store, tmp_path, text=text)
    with store.read() as conn:
        dirs = dict(conn.execute(select(s.pipelines.c.pipeline_id, s.pipelines.c.checkpoint_dir)).all())
    for directory in dirs.values():             # made by the first run's driver
        os.makedirs(directory)

    def resume(**kwargs):
        return resume_job(store, "j1", plan=build_plan(load_job_text(text)), text=text, variables={}, **kwargs)

    _cancel(coordinator, store, release=True)
    resume(fallback="fresh")
    assert json.loads(_job(store).restore)["prepare"] == {"1": None, "2": None}
    _driver(store, only=1)                      # pipeline 1 moved; the driver ends before pipeline 2's move
    _cancel(coordinator, store)
    answer = resume()                           # no fallback asked: the release's fresh start is carried on
    assert json.loads(_job(store).restore)["prepare"] == {"2": None}, answer
    _driver(store)
    assert began_anew(dirs[1]) == {"began": 2}
    assert began_anew(dirs[2]) == began_anew(dirs[1]), \
        "pipelines started over by one fresh-start decision got two save-mode scopes"
