"""The randomized CDC check with real processes: a `seatide run` job whose driver is SIGKILLed.

    PYTHONPATH=src .venv/bin/python -m seatide.testing.cdc_job_check --seed 7 --transactions 200

The workload is ``cdc_check``'s (inserts, value and key updates, deletes, TRUNCATE, large
values, edge numerics); the job is what a user runs: `seatide run` of a STREAMING job, a
CDC source into the Jdbc sink with ``primary_keys``, a checkpoint every second and small
micro-batches. At points the seed picks, the job's driver process is SIGKILLed; the job's
retry starts a new driver that resumes from the last checkpoint. A TRUNCATE fails the job
(FAILED, with the way out); the check takes it: empties the target and submits the job again
as a new job. At the end the target must equal the source.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time

from seatide.testing.cdc_check import SOURCE_DDL, Endpoint, Workload, _difference, arguments, check_endpoints
from seatide.testing.driver_processes import driver_pids

SEATIDE = [sys.executable, "-m", "seatide.cli.main"]


def _job(source: Endpoint, target: Endpoint, table: str, upsert: bool) -> str:
    database = source.url.rsplit("/", 1)[1]
    if source.kind == "postgres":
        reader = f'Postgres-CDC {{ base-url = "{source.url}", username = "{source.user}", password = "", ' \
                 f'table-names = ["{database}.public.items"], snapshot.split.size = 10 }}'
    else:
        reader = f'MySQL-CDC {{ base-url = "{source.url}", username = "{source.user}", password = "", ' \
                 f'table-names = ["{database}.items"], snapshot.split.size = 10, server-id = 5498 }}'
    return f"""
env {{ job.mode = "STREAMING", checkpoint.interval = 1000, micro-batch.max-rows = 40,
      job.retry.times = 100, job.retry.interval.seconds = 1 }}
source {{ {reader} }}
sink {{ Jdbc {{ url = "{target.url}", user = "{target.user}", password = "", table = "{table}",
               primary_keys = ["id"], enable_upsert = {str(upsert).lower()} }} }}
"""


def run_job_check(source: Endpoint, target: Endpoint, *, upsert: bool, seed: int, transactions: int,
                  workdir: str, kills: int = 3, deadline_s: float = 300.0) -> dict:
    """Run the workload against a `seatide run` job; raise AssertionError unless the target ends
    equal to the source. Returns what ran (transactions, statements, kills, truncates)."""
    rng = random.Random(seed)
    workload = Workload(rng)
    job_id, table = f"cdcjob{seed}{os.getpid()}", f"cdc_job_check_{seed}"
    source.execute("DROP TABLE IF EXISTS items", SOURCE_DDL[source.kind], *[workload.insert() for _ in range(20)])
    target.execute(f"DROP TABLE IF EXISTS {table}")
    conf, data_dir = os.path.join(workdir, "job.conf"), os.path.join(workdir, "data")
    with open(conf, "w", encoding="utf-8") as out:
        out.write(_job(source, target, table, upsert))
    ran = {"seed": seed, "transactions": 0, "statements": 0, "kills": 0, "truncates": 0}
    kill_at = sorted(rng.sample(range(1, max(2, transactions)), min(kills, max(1, transactions - 1))))
    job = {"id": job_id, "conf": conf, "data_dir": data_dir}
    process = _start([*SEATIDE, "run", conf, "--job-id", job_id, "--data-dir", data_dir])

    def same() -> bool:
        try:
            return target.rows(table) == source.rows("items")
        except Exception:   # the target table is not created yet
            return False

    def converge(what: str):
        nonlocal process
        deadline = time.monotonic() + deadline_s
        while not same():
            if process.poll() is not None:     # the job ended: a TRUNCATE failed it (or something else did)
                process = _way_out(process, source, target, table, job, ran)
            if time.monotonic() > deadline:
                raise AssertionError(f"seed {seed}: {what}: the target differs from the source after "
                                     f"{deadline_s} s: {_difference(target.rows(table), source.rows('items'))} ({ran})")
            time.sleep(0.5)

    try:
        converge("the snapshot")
        while ran["transactions"] < transactions:
            for _ in range(min(rng.randint(1, 6), transactions - ran["transactions"])):
                statements = workload.transaction()
                source.execute(*([("BEGIN", ()), *statements, ("COMMIT", ())] if len(statements) > 1 else statements))
                ran["transactions"] += 1
                ran["statements"] += len(statements)
            if kill_at and ran["transactions"] >= kill_at[0]:
                kill_at.pop(0)
                if _kill_driver(job["id"]):
                    ran["kills"] += 1
        converge("the end")
        return ran
    finally:
        stop_job(process)
        target.execute(f"DROP TABLE IF EXISTS {table}")


def stop_job(process) -> None:
    """Stop a `seatide run` process as a user's Ctrl-C does (killed if it lingers)."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()


def _start(command: list[str]) -> subprocess.Popen:
    """The job's process; its output goes to a file beside its data (a pipe nobody reads while
    it runs would fill and stall it), read back by ``_output``."""
    log = os.path.join(command[command.index("--data-dir") + 1] + ".log")
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    process.log = log
    return process


def _output(process) -> str:
    with open(process.log, encoding="utf-8", errors="replace") as out:
        return out.read()


def _kill_driver(job_id: str) -> bool:
    """SIGKILL the job's driver (if it has one right now) and wait for its replacement."""
    first = driver_pids(job_id)
    if not first:
        return False
    os.kill(first[0], signal.SIGKILL)
    deadline = time.monotonic() + 180
    while driver_pids(job_id) in ([], first) and time.monotonic() < deadline:
        time.sleep(0.2)
    return True


def _way_out(process, source: Endpoint, target: Endpoint, table: str, job: dict, ran: dict):
    """A job that ended before the check did must have failed on a TRUNCATE: take the way out
    its message names (empty the target, submit the job again as a new job); the failed job's
    replication slot goes, as its cleanup would drop it."""
    error = _output(process)
    if "was truncated" not in error or "submit it again" not in error:
        raise AssertionError(f"the CDC job ended (exit {process.returncode}) without a TRUNCATE: {error[-3000:]}")
    ran["truncates"] += 1
    target.execute(f"DELETE FROM {table}")
    if source.kind == "postgres":
        source.execute(("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE %s",
                        (f"seatide_{job['id']}%",)))
    job["id"] = f"{job['id'].split('_')[0]}_{ran['truncates']}"
    return _start([*SEATIDE, "run", job["conf"], "--job-id", job["id"], "--data-dir", job["data_dir"]])


def main() -> None:
    parser = arguments(__doc__, 200)
    parser.add_argument("--kills", type=int, default=5)
    args = parser.parse_args()
    with check_endpoints() as endpoints:
        for kind in args.source.split(","):
            for mode in args.sink.split(","):
                source, target = endpoints[kind]
                ran = run_job_check(source, target, upsert=mode == "upsert", seed=args.seed,
                                    transactions=args.transactions, kills=args.kills,
                                    workdir=tempfile.mkdtemp(prefix="cdc-job-check-"))
                print(f"{kind} -> {target.kind}, {mode}: target equals source; {ran}", flush=True)


if __name__ == "__main__":
    main()
