"""The leader lease as a SeaTide from before revision 0022 kept it: the table ``leader_lease``.

For tests that put a store back to an older revision (``lease_as_before``) and for the older version's lease code
(``before_0022``): this package's ``LeaderLease``, ``Store.leader_tx`` and views, which differ from that version's in
the table they name (revision 0022 renamed it), in their leader liveness lock's name (moved with it) and in the rule
for the lease copied at the move (a table it has not), made to name the old ones and to know no such rule.
"""

from __future__ import annotations

import contextlib

from sqlalchemy import Boolean, Column, MetaData, Table, false, inspect, text

from seatide.coordinator import lease
from seatide.store import schema
from tests.store import legacy_v2

# As schema version 2 made it (before Alembic), with revision 0006's ``liveness``; so up to 0021.
LEADER_LEASE = Table(
    "leader_lease", MetaData(), *(column._copy() for column in legacy_v2.leader_lease.columns),
    Column("liveness", Boolean, nullable=False, default=False, server_default=false()),
)
COLUMNS = "id, node_id, epoch, expires_at, url, acquired_at, liveness"
# The leader liveness lock's name before 0022 (store/liveness.py ``LEADER`` now).
OLDER_LEADER_LOCK = "leader"


def lease_as_before(conn) -> None:
    """Revision 0022's move undone: the lease row back in ``leader_lease``, ``leadership`` gone. A store that has no
    ``leadership`` (made by a SeaTide before 0022) already is so."""
    if not inspect(conn).has_table("leadership"):
        return
    LEADER_LEASE.create(conn)
    conn.execute(text(f"INSERT INTO leader_lease ({COLUMNS}) SELECT {COLUMNS} FROM leadership"))
    conn.execute(text("DROP TABLE leadership"))


@contextlib.contextmanager
def before_0022():
    """Within it, this process's lease code is the older version's: it names ``leader_lease`` and the older leader
    liveness lock."""
    newer = getattr(schema, "leadership", None)
    rule, lock = lease.copied_at_the_move, lease.LEADER
    schema.leadership, lease.copied_at_the_move, lease.LEADER = LEADER_LEASE, lambda row: False, OLDER_LEADER_LOCK
    try:
        yield
    finally:
        lease.copied_at_the_move, lease.LEADER = rule, lock
        if newer is None:
            del schema.leadership
        else:
            schema.leadership = newer
