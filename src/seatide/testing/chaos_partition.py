"""The chaos runner's network partition: one worker, and so its drivers, cut off from the store.

The worker ``w-cut`` runs inside a ``Partition``'s network namespace and reaches the store
(a PrivatePostgres) through the veth pair; its drivers inherit the namespace. It shares the
machine's file system, so while it is cut off it can still write the sink directory: only
the store can stop it. The fault cuts the link for longer than the leader needs to declare
the worker lost and replace its attempts (``worker_lost_after``, plus the drivers'
self-fence, plus a margin), then heals it.

The invariant (issue 9): a driver of the cut-off worker decides nothing after its attempt
was ended. A file sink publishes only what was decided (``runtime/commit_log.py``), so
"decides nothing" is "publishes nothing"; the runner's exactly-once row checks catch a
publish without a decision. Decisions of the worker's attempts are sampled all along,
because retention prunes published manifests before the final check could read them.

Measured and reported: from the cut to the replacement attempt RUNNING, and from the heal
to every job converged.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from sqlalchemy import select

from seatide.store import schema as s
from seatide.store.states import AttemptState
from seatide.testing.partition import Partition

CUT_WORKER = "w-cut"
# A decision's time is read before its transaction commits, and the attempt's end is written
# by another process: a decision that committed just before the end may carry a later time.
DECISION_SLACK_S = 0.5


@dataclass
class Cut:
    began: float
    seconds: float
    healed: float | None = None


@dataclass
class CutWorker:
    partition: Partition
    store_url: str                       # the store as seen from inside the namespace
    cuts: list[Cut] = field(default_factory=list)
    running_since: dict[int, float] = field(default_factory=dict)      # attempt -> first seen RUNNING
    decisions: dict[tuple, tuple[int, float]] = field(default_factory=dict)   # manifest key -> (attempt, at)

    @classmethod
    def inside(cls, partition: Partition, store_url: str) -> "CutWorker":
        """``store_url`` as the host reaches it (127.0.0.1): rewritten to the pair's host end."""
        if "@127.0.0.1:" not in store_url:
            raise ValueError(f"a partitioned worker needs a store on 127.0.0.1, got {store_url}")
        return cls(partition, store_url.replace("@127.0.0.1:", f"@{partition.host_address}:"))

    def start(self, cluster, slots: int = 2, wait: bool = True):
        cluster.other_store_urls.append(self.store_url)
        return cluster.worker(CUT_WORKER, slots=slots, env=self.partition.env,
                              wrap=self.partition.wrap([]), store_url=self.store_url, wait=wait)

    @staticmethod
    def seconds_needed(timeouts: dict) -> float:
        """The shortest cut after which the leader has surely replaced the worker's attempts:
        lost (or hung) past its timeout, its drivers fenced themselves before that."""
        return max(timeouts["worker"], timeouts["driver"]) + timeouts["self_fence"]

    def cut(self, seconds: float) -> None:
        self.partition.cut()
        self.cuts.append(Cut(time.time(), seconds))

    def heal(self) -> None:
        self.partition.heal()
        self.cuts[-1].healed = time.time()

    # -- observed all along (the chaos sampler's thread) ------------------------------------
    def sample(self, conn, now: float) -> None:
        a, m = s.attempts.c, s.sink_manifests.c
        for row in conn.execute(select(a.attempt_id).where(a.state == AttemptState.RUNNING)):
            self.running_since.setdefault(row.attempt_id, now)
        rows = conn.execute(select(m.job_id, m.incarnation, m.pipeline_id, m.plugin_id, m.transaction_id,
                                   m.attempt_id, m.decided_at)
                            .join(s.attempts, s.attempts.c.attempt_id == m.attempt_id)
                            .where(a.worker_id == CUT_WORKER))
        for row in rows:
            key = (row.job_id, row.incarnation, row.pipeline_id, row.plugin_id, row.transaction_id)
            self.decisions[key] = (row.attempt_id, row.decided_at)

    # -- after settling ---------------------------------------------------------------------
    def cut_off_attempts(self, cluster) -> list[tuple[Cut, object]]:
        """(cut, attempt) for every attempt of the worker live when a cut began."""
        with cluster.store.read() as conn:
            attempts = list(conn.execute(select(s.attempts).where(s.attempts.c.worker_id == CUT_WORKER)))
        ended = {row.attempt_id: replaced_at(cluster, row) for row in attempts}
        return [(cut, row) for cut in self.cuts for row in attempts if row.created_at < cut.began
                and (ended[row.attempt_id] is None or ended[row.attempt_id] > cut.began)]

    def violations(self, cluster) -> list[str]:
        found = []
        cut_off = {row.attempt_id: row for _, row in self.cut_off_attempts(cluster)}
        for key, (attempt_id, decided_at) in sorted(self.decisions.items()):
            if attempt_id not in cut_off:
                continue
            row = cut_off[attempt_id]
            ended = replaced_at(cluster, row)
            if ended is None:
                found.append(f"{row.job_id}: attempt {attempt_id} was cut off from the store and never ended")
            elif decided_at > ended + DECISION_SLACK_S:
                found.append(f"{row.job_id}: attempt {attempt_id}, cut off from the store, decided batch {key[4]} "
                             f"{decided_at - ended:.1f} s after it was replaced")
        return found

    def measured(self, cluster) -> list[str]:
        """One line per cut-off attempt: when it was ended, and when a later attempt of its job
        was first seen RUNNING (the first replacement may itself die to another fault)."""
        lines = [f"partition: {len(self.cuts)} cut(s); {len(self.decisions)} decision(s) by {CUT_WORKER}'s "
                 f"attempts sampled"]
        for cut, row in self.cut_off_attempts(cluster):
            later = [(self.running_since[a.attempt_id], a) for a in cluster.attempts(row.job_id)
                     if a.attempt_id > row.attempt_id and a.attempt_id in self.running_since]
            ended = replaced_at(cluster, row)
            ended = f"{ended - cut.began:.1f} s" if ended else "never"
            running = "no later attempt seen RUNNING"
            if later:
                since, first = min(later, key=lambda pair: pair[0])
                running = (f"attempt {first.attempt_id} on {first.worker_id} RUNNING "
                           f"{since - cut.began:.1f} s after the cut")
            lines.append(f"partition: {row.job_id} attempt {row.attempt_id} ({row.state}) ended {ended} after "
                         f"the cut; {running}")
        return lines


def replaced_at(cluster, attempt) -> float | None:
    """When the attempt stopped being one that may commit: the leader declared it LOST (its
    ``ended_at`` comes only when its worker, healed, records the driver's exit), or it ended."""
    for event in cluster.events(attempt.job_id):
        if event.kind == "ATTEMPT_LOST" and json.loads(event.detail).get("attempt") == attempt.attempt_id:
            return event.at
    return attempt.ended_at
