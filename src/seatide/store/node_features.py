"""What a node's SeaTide can do, said on its presence row (``nodes.features``, store revision 0021).

A process of an older SeaTide already running when the store was upgraded keeps running on it: the revision
stops only a process that *opens* the store (store/migrations.py). Such a process reads a job's row with its own
rules: one from before recorded environments fills a marked job's ``${NAME}``s from its own process's
environment (config/job_environment.py; outside review F3). Its presence row, written by it, has no
``features``; a process of this version registers with ``FEATURES`` (coordinator/service.py ``register_node``).
So:

* the leader assigns no job to a worker without ``RECORDED_ENVIRONMENT`` (coordinator/reconcile.py
  ``choose_worker``): an older worker, its warm drivers and its drivers never get one;
* no job is recorded with the mark while a coordinator without it may lead (``older_coordinators``, intents.py):
  an older coordinator leading reads every job's row (its reconcile, source watch and release).
"""

from __future__ import annotations

from sqlalchemy import and_, select
from sqlalchemy.engine import Connection

from seatide.store import schema as s
from seatide.store.clock import read_store_now

RECORDED_ENVIRONMENT = "recorded-environment"
FEATURES = RECORDED_ENVIRONMENT          # comma-separated, what this version's nodes can do
# A coordinator row without the feature that heartbeated within this long is taken for alive (a clean stop
# marks its row ``stopped`` at once). A crashed older coordinator holds marked submits back this long at most.
# A fixed window, so not sound: one alive with --worker-heartbeat-interval over 60 s (its heartbeat), cut off
# from the store or paused longer is not caught; the upgrade order stops every older coordinator before any
# process of this version starts (docs/operations.md, revision 0021).
OLDER_ALIVE_WITHIN_S = 60.0


def has_feature(node, feature: str = RECORDED_ENVIRONMENT) -> bool:
    """Whether the node's presence row says its SeaTide has ``feature``; a row from before says nothing."""
    return feature in (node.features or "").split(",")


def older_coordinators(conn: Connection) -> list:
    """The coordinators without ``RECORDED_ENVIRONMENT`` that may be alive: not stopped, heartbeated within
    ``OLDER_ALIVE_WITHIN_S`` (store clock)."""
    n = s.nodes.c
    since = read_store_now(conn) - OLDER_ALIVE_WITHIN_S
    rows = conn.execute(select(n.node_id, n.host, n.pid, n.features).where(and_(
        n.role == "coordinator", n.stopped.is_(False), n.heartbeat_at >= since)).order_by(n.node_id)).all()
    return [row for row in rows if not has_feature(row)]
