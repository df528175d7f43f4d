"""Liveness locks: a crashed leader or worker is seen at once, not after a timeout.

* ``leader_lease.liveness``: the leader holds the leader liveness lock; a follower that
  finds that lock free may take over before the lease expires.
* ``nodes.liveness``: the node holds its own liveness lock; the leader judges it dead the
  moment the lock is free.

Rows written before this revision read False: lease and heartbeats only, as before.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("leader_lease", sa.Column("liveness", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column("nodes", sa.Column("liveness", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("liveness")
    with op.batch_alter_table("leader_lease") as batch:
        batch.drop_column("liveness")
