"""The PostgreSQL shapes check with real processes: a `seatide run` job whose driver is SIGKILLed.

    PYTHONPATH=src .venv/bin/python -m seatide.testing.cdc_shapes_pg_check --job --seed 7 --transactions 200

The workload is ``cdc_shapes_pg``'s; the job is what a user runs (``cdc_shapes_pg.job_text``:
one Postgres-CDC source of every shard into the Jdbc sink, a checkpoint every second). At points
the seed picks the driver is SIGKILLed and the job's retry resumes it from its checkpoint. A job
that ends on a shape the stream cannot carry (a shard dropped and created again or truncated; a
key outside its identity at the start) must have failed naming it; the check takes the way out
the message names and submits the job again as a new job. At the end every target must equal
its source.
"""

from __future__ import annotations

import os
import random
import secrets

from seatide.testing.cdc_check import Endpoint
from seatide.testing.cdc_job_check import SEATIDE, _kill_driver, _output, _start, stop_job
from seatide.testing.cdc_shapes_pg import (GONE, REFUSED, ShapesOutcome, ShapesWorkload, drop_database, job_text,
                                           shapes_database, source_rows, target_rows, until_equal)


def run_shapes_job_check(admin: Endpoint, target: Endpoint, *, seed: int, transactions: int, workdir: str,
                         merged: bool = False, megabytes: float = 0.02, shards: int = 3, kills: int = 3,
                         deadline_s: float = 300.0) -> ShapesOutcome:
    """Run the workload against `seatide run` jobs; raise AssertionError unless every target ends
    equal to its source. ``outcome.crashes`` counts the drivers killed."""
    rng = random.Random(seed)
    workload = ShapesWorkload(rng, shards, megabytes)
    source = shapes_database(admin, seed)
    source.execute(*workload.setup())
    table = f"shapes_job_{seed}_{secrets.token_hex(3)}"
    targets = [table] if merged else [f"{table}_{s.name}" for s in workload.shards]
    conf = os.path.join(workdir, "job.conf")
    with open(conf, "w", encoding="utf-8") as out:
        out.write(job_text(source.url, target.url, workload.shards, table, merged))
    outcome = ShapesOutcome(seed)
    job = {"id": f"shapesjob{seed}{os.getpid()}", "runs": 0}
    kill_at = sorted(rng.sample(range(1, max(2, transactions)), min(kills, max(1, transactions - 1))))

    def submit():
        return _start([*SEATIDE, "run", conf, "--job-id", f"{job['id']}_{job['runs']}",
                       "--data-dir", os.path.join(workdir, f"data{job['runs']}")])

    def way_out(process):
        """The job ended: it must have failed naming a shape, whose way out is taken here."""
        error = _output(process)
        reason = next((g for g in GONE if g in error), None)
        misfit = next((s for s in workload.shards if s.misfit and f"public.{s.name}" in error), None)
        if reason is not None and "submit it again" in error:
            for name in targets:
                target.execute(f"DELETE FROM {name}")
            source.execute(("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name "
                            "LIKE %s AND NOT active", (f"seatide_{job['id']}%",)))
        elif REFUSED in error and misfit is not None:
            reason = "identity"
            source.execute(f"ALTER TABLE {misfit.name} REPLICA IDENTITY FULL")
        else:
            raise AssertionError(f"seed {seed}: the job ended (exit {process.returncode}) without a shape it "
                                 f"must refuse: {error[-3000:]}")
        outcome.way_outs.append(reason)
        job["runs"] += 1
        return submit()

    def converge(what: str) -> None:
        def way_out_if_ended():
            if running[0].poll() is not None:
                running[0] = way_out(running[0])

        until_equal(lambda: (target_rows(target, workload.shards, table, merged),
                             source_rows(source, workload.shards, merged)),
                    deadline_s, f"seed {seed}: {what} ({outcome})", way_out_if_ended)

    running = [submit()]            # the job's process now (a way out submits another)
    try:
        converge("the snapshot")
        while outcome.transactions < transactions:
            for _ in range(min(rng.randint(1, 6), transactions - outcome.transactions)):
                statements = workload.transaction()
                source.execute(*statements)
                outcome.transactions += 1
                outcome.statements += len(statements)
            if kill_at and outcome.transactions >= kill_at[0]:
                kill_at.pop(0)
                if _kill_driver(f"{job['id']}_{job['runs']}"):
                    outcome.crashes += 1
        converge("the end")
        return outcome
    finally:
        stop_job(running[0])
        for name in targets:
            target.execute(f"DROP TABLE IF EXISTS {name}")
        drop_database(admin, source)
