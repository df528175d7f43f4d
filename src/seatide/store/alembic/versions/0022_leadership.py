"""The leader lease moves to a table a SeaTide from before does not know: ``leader_lease`` becomes ``leadership``.

A process of an older SeaTide already running when the store was upgraded keeps running on it (the revision stops
only one that *opens* the store), and one from before recorded environments, leading, would fill a marked job's
``${NAME}``s from its own environment (revision 0021). Which older coordinators are alive cannot be told for sure
(a heartbeat interval over any window, a pause, a partition). So it is made impossible instead: its election, its
renewal and every leader write it fences (``Store.leader_tx``) name ``leader_lease``, which is gone. It can never
lead again, and one leading loses the lease by its own rule (a renewal that does not land before expiry).

The row is copied as it is, so a leader of this version holding it keeps it, and ``moved_at_epoch`` says which epoch
it had: a holder of that epoch may be an older process, still acting until its expiry; a later epoch was elected
through this table, by this version (intents.py, store/node_features.py).

Revision ID: 0022
Revises: 0021
"""

import logging

import sqlalchemy as sa
from alembic import op

log = logging.getLogger("seatide.store.migrations")

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

COLUMNS = "id, node_id, epoch, expires_at, url, acquired_at, liveness"


def _lease_columns() -> list[sa.Column]:
    return [sa.Column("id", sa.Integer(), primary_key=True), sa.Column("node_id", sa.String(128)),
            sa.Column("epoch", sa.BigInteger(), nullable=False), sa.Column("expires_at", sa.Float(), nullable=False),
            sa.Column("url", sa.String(256)), sa.Column("acquired_at", sa.Float()),
            sa.Column("liveness", sa.Boolean(), nullable=False, server_default=sa.false())]


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        # No renewal may land in the old table after the copy is read: it would outlast the copied expiry, and its
        # older holder would go on acting past it. (SQLite: this migration holds the store's write lock.)
        op.execute("LOCK TABLE leader_lease IN ACCESS EXCLUSIVE MODE")
    op.create_table("leadership", *_lease_columns(),
                    sa.Column("moved_at_epoch", sa.BigInteger(), nullable=False, server_default="0"))
    op.execute(f"INSERT INTO leadership ({COLUMNS}, moved_at_epoch) SELECT {COLUMNS}, epoch FROM leader_lease")
    op.drop_table("leader_lease")
    held = op.get_bind().execute(sa.text("SELECT node_id, epoch, expires_at FROM leadership WHERE epoch > 0")).first()
    if held is not None:
        log.warning("revision 0022 moved the leader lease (coordinator %s, epoch %s, expiring at %.0f, epoch seconds "
                    "by the store's clock) to the table leadership: if that coordinator is of an older SeaTide and "
                    "still runs, it can no longer lead, and submits and resumes that record an environment are "
                    "refused until a coordinator of this version is elected, after that expiry (docs/operations.md, "
                    "Upgrading); stop every older coordinator", held.node_id, held.epoch, held.expires_at)


def downgrade() -> None:
    # An older SeaTide must not read the marked rows this one wrote (revision 0021): go back only with them gone.
    # Nor may any coordinator run: the lease comes back in ``leader_lease``, where an older one still running finds
    # it and may elect and lead again, and it goes from under every coordinator of this version or later. Stop
    # them all, older and newer, first (docs/operations.md, Upgrading, Going back); nothing here can check it.
    op.create_table("leader_lease", *_lease_columns())
    op.execute(f"INSERT INTO leader_lease ({COLUMNS}) SELECT {COLUMNS} FROM leadership")
    op.drop_table("leadership")
