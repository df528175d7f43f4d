"""What a node's SeaTide can do, said on its presence row (``nodes.features``, store revision 0021), and when an
older SeaTide may still lead (the lease's table, revision 0022).

A process of an older SeaTide already running when the store was upgraded keeps running on it: the revision
stops only a process that *opens* the store (store/migrations.py). Such a process reads a job's row with its own
rules: one from before recorded environments fills a marked job's ``${NAME}``s from its own process's
environment (config/job_environment.py; outside review F3). So:

* the leader assigns a job only to a worker whose code heads the store's current revision: its row's ``features``
  name it (``store-<HEAD>``, ``heads_store``; coordinator/reconcile.py ``choose_worker``). A worker from before
  0021 says nothing; one of 0021's release says ``recorded-environment`` and no revision; either of them, or one
  of any release before the store's revision, starts drivers that refuse the store ("newer than this SeaTide"),
  and an attempt given to it would fail and burn the job's retries. Such a worker, its warm drivers and its
  drivers never get a job; a process of this version registers with ``FEATURES`` (coordinator/service.py
  ``register_node``);
* an older coordinator never leads once the store is at 0022: the lease moved to ``leadership``, a table it does
  not know, so its election, its renewal and its fenced writes all fail. One that held the lease at the move
  may go on acting until that lease's expiry, by its own clock, and stops then (coordinator/lease.py): so no job
  is recorded with the mark until a leader was elected through the new table (``older_leader_may_act``,
  intents.py). Whether an older coordinator is alive is never guessed (no heartbeat window).

What cannot be closed: an older leader's ``SourceWatch`` checks that it leads, then reads left-held jobs' rows
unfenced and contacts their sources. Frozen between the two (a VM freeze, SIGSTOP) for longer than the ttl, a new
election and a marked submit, on waking it reads that marked row and contacts its source with ``${NAME}``s from its
own environment. The older code cannot be changed: older coordinators must be *stopped* before the upgrade, not
paused or cut off (docs/operations.md, Upgrading).
"""

from __future__ import annotations

from sqlalchemy import select, text
from sqlalchemy.engine import Connection

from seatide.store import schema as s
from seatide.store.migrations import HEAD, VERSION_TABLE

RECORDED_ENVIRONMENT = "recorded-environment"
STORE_REVISION = "store-"                # + the revision the node's code heads (migrations.HEAD)
# Comma-separated, what this version's nodes can do. A later revision changes the store token by itself.
FEATURES = ",".join((RECORDED_ENVIRONMENT, STORE_REVISION + HEAD))


def has_feature(node, feature: str = RECORDED_ENVIRONMENT) -> bool:
    """Whether the node's presence row says its SeaTide has ``feature``; a row from before says nothing."""
    return feature in (node.features or "").split(",")


def heads_store(node, revision: str) -> bool:
    """Whether the node's code heads exactly the store revision ``revision``: its drivers open the store as it is."""
    return has_feature(node, STORE_REVISION + revision)


def store_revision(conn: Connection) -> str:
    """The store's current revision (store/migrations.py keeps one row)."""
    return conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()


def older_leader_may_act(conn: Connection):
    """The lease row while its holder may be a SeaTide from before revision 0022, else None.

    That is while its epoch is the one copied at the move: an election through ``leadership`` (by this version:
    no other knows it) raises the epoch, and takes the copied lease only once it expired by the store's clock
    (lease.py: not when its holder's liveness lock comes free, nor for the holder's own node id), by when an older
    holder has stopped acting by its own rule. Epoch 0 at the move: nobody had led.
    """
    lease = conn.execute(select(s.leadership).where(s.leadership.c.id == 1)).first()
    return lease if lease is not None and copied_at_the_move(lease) else None


def copied_at_the_move(lease) -> bool:
    """Whether the lease row is still the one revision 0022 copied from ``leader_lease`` (a lease had been taken):
    its holder may be a SeaTide from before. It is taken at its expiry only (coordinator/lease.py)."""
    return 0 < lease.moved_at_epoch and lease.epoch <= lease.moved_at_epoch
