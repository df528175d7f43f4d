"""The MySQL shapes check's start-up window and its record of the changes a refusal may be of.

A first snapshot passes over what it holds of the binlog between a table's description and its
position *P* (mysql_cdc/snapshot_window.py): a TRUNCATE, a DROP and CREATE with the same columns,
a change logged as text. A refusal of one of these there is a bug, not a way out. So the
workload records each change it makes that the stream must refuse once it follows the binlog
(``Rowless``), and a refusal counts as a way out only when the workload made that kind of change
of the table it names while streaming (after a batch of the query, so after *P*), or re-created
it in another character set, which is refused wherever it falls (its rows would be decoded in
the wrong one).

``start_in_window`` starts the query with its description held after the last table's (the
failpoint ``mysql_cdc.table_described``, in this process: the check's driver is the query's)
while one change is made to another table: in the window, for certain.
"""

from __future__ import annotations

import os
import random
import tempfile
import threading
import time

TABLE_DESCRIBED = "mysql_cdc.table_described"
DROPPED = "was dropped"
# the changes made in the window, each as the statements of a shard (``MySqlShapes``)
KINDS = ("truncate", "statement", "created again", "another charset")


class Rowless:
    """The changes the workload made that the stream must refuse, since the job last started over."""

    def __init__(self):
        self.made: set = set()          # (table, reason as the refusal's pattern gives it)

    def made_change(self, table: str, reason: str) -> None:
        self.made.add((table, reason))

    def check(self, error: str, gone: tuple, seed: int) -> None:
        """AssertionError when ``error`` is a refusal (one of ``gone``, whole) of a change the workload
        did not make where it is refused; else the record starts again (the check takes the way out:
        a fresh snapshot holds every change before it)."""
        found = next(filter(None, (g.search(error) for g in gone)), None)
        if found is None:
            return
        table, reason = found.group("table").rsplit(".", 1)[-1], found.group("reason")
        if (table, reason) not in self.made:
            raise AssertionError(f"seed {seed}: the job refused {table} ({reason}), but the workload made no such "
                                 f"change of it after the snapshot's position (made: {sorted(self.made)}): "
                                 f"{error[-2000:]}")
        self.made.clear()


def window_change(workload, draw: random.Random, kind: str) -> list:
    """The statements of one change of ``kind`` to the first shard, made in the window (the last
    shard's description holds its lock meanwhile)."""
    shard = workload.shards[0]
    if kind == "truncate":
        shard.live.clear()
        return [f"TRUNCATE {shard.name}"]
    if kind == "statement":
        return ["SET SESSION binlog_format = 'STATEMENT'", workload.insert(shard), "SET SESSION binlog_format = 'ROW'"]
    if kind == "another charset":
        shard.charset = "latin1" if shard.charset == "utf8mb4" else "utf8mb4"
        workload.rowless.made_change(shard.name, DROPPED)
    return ["BEGIN", *workload.create(shard, rows=draw.randint(0, 4)), "COMMIT"]


def start_in_window(start, conf: str, source, workload, draw: random.Random, deadline_s: float = 120.0):
    """``start()`` (of job ``conf``) with the stream's description held at the last shard's
    ``mysql_cdc.table_described`` while a change drawn (``KINDS``) is made to the first: the query,
    and the change's kind."""
    from seatide import failpoints

    kind = draw.choice(KINDS)
    # the plan built in ``start`` may describe the tables too (a sink's catalog, with the source's
    # tables()): the description the stream reads with is the read's, the last
    passes = planned_descriptions(conf) + len(workload.shards) - 1
    statements = window_change(workload, draw, kind)
    gate = os.path.join(tempfile.gettempdir(), f"seatide-described-{os.getpid()}-{time.monotonic_ns()}")
    failpoints._POINTS[TABLE_DESCRIBED], failpoints._HITS[TABLE_DESCRIBED] = f"gate:{passes}:{gate}", 0
    failed: list = []

    def change():
        deadline = time.monotonic() + deadline_s
        try:
            while failpoints._HITS.get(TABLE_DESCRIBED, 0) <= passes:
                if time.monotonic() > deadline:
                    raise AssertionError(f"the query's description did not reach {TABLE_DESCRIBED} in {deadline_s} s")
                time.sleep(0.02)
            source.execute(*statements)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            failed.append(exc)
        finally:
            open(gate, "w").close()

    changing = threading.Thread(target=change, daemon=True)
    changing.start()
    try:
        query = start()
    finally:
        changing.join(deadline_s)
        failpoints._POINTS.pop(TABLE_DESCRIBED, None)
        if os.path.exists(gate):
            os.remove(gate)
    if failed:
        raise AssertionError(f"the change in the window ({kind}) failed: {failed[0]}")
    return query, kind


def planned_descriptions(conf: str) -> int:
    """How many tables building ``conf``'s plan describes (the failpoint counted, never held)."""
    from seatide import failpoints
    from seatide.config.loader import load_job_text
    from seatide.plan.dag import build_plan

    failpoints._POINTS[TABLE_DESCRIBED], failpoints._HITS[TABLE_DESCRIBED] = f"gate:{10**9}:/nonexistent", 0
    try:
        build_plan(load_job_text(conf))
        return failpoints._HITS.get(TABLE_DESCRIBED, 0)
    finally:
        failpoints._POINTS.pop(TABLE_DESCRIBED, None)
