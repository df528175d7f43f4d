"""What a node's SeaTide can do, said on its presence row (``nodes.features``, store revision 0021), and when an
older SeaTide may still lead (the lease's table, revision 0022).

A process of an older SeaTide already running when the store was upgraded keeps running on it: the revision
stops only a process that *opens* the store (store/migrations.py). Such a process reads a job's row with its own
rules: one from before recorded environments fills a marked job's ``${NAME}``s from its own process's
environment (config/job_environment.py; outside review F3). So:

* the leader assigns no job to a worker without ``RECORDED_ENVIRONMENT`` (coordinator/reconcile.py
  ``choose_worker``): an older worker, its warm drivers and its drivers never get one. Its presence row, written
  by it, has no ``features``; a process of this version registers with ``FEATURES`` (coordinator/service.py
  ``register_node``);
* an older coordinator never leads once the store is at 0022: the lease moved to ``leadership``, a table it does
  not know, so its election, its renewal and its fenced writes all fail. One that held the lease at the move
  may go on acting until that lease's expiry, by its own clock, and stops then (coordinator/lease.py): so no job
  is recorded with the mark until a leader was elected through the new table (``older_leader_may_act``,
  intents.py). Whether an older coordinator is alive is never guessed (no heartbeat window).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.engine import Connection

from seatide.store import schema as s

RECORDED_ENVIRONMENT = "recorded-environment"
FEATURES = RECORDED_ENVIRONMENT          # comma-separated, what this version's nodes can do


def has_feature(node, feature: str = RECORDED_ENVIRONMENT) -> bool:
    """Whether the node's presence row says its SeaTide has ``feature``; a row from before says nothing."""
    return feature in (node.features or "").split(",")


def older_leader_may_act(conn: Connection):
    """The lease row while its holder may be a SeaTide from before revision 0022, else None.

    That is while its epoch is the one copied at the move: an election through ``leadership`` (by this version:
    no other knows it) raises the epoch, and takes place only once the copied lease expired or its holder died
    (lease.py), by when an older holder has stopped acting by its own rule. Epoch 0 at the move: nobody had led.
    """
    lease = conn.execute(select(s.leadership).where(s.leadership.c.id == 1)).first()
    if lease is not None and 0 < lease.moved_at_epoch and lease.epoch <= lease.moved_at_epoch:
        return lease
    return None
