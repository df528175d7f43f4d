"""Retention: what pruning needs to stay cheap and to keep counts true.

* ``jobs.checkpoints_retained``: the job's ``checkpoint.retained`` (the leader prunes by it
  without loading the job's config text); NULL for jobs submitted before, which get the
  default.
* ``pipelines.pruned_completed`` / ``pruned_failed``: checkpoint rows removed by retention,
  so the completed and failed counts (and their Prometheus counters) never go down.
* ``ix_events_at``: events are pruned by age.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("checkpoints_retained", sa.Integer(), nullable=True))
    for name in ("pruned_completed", "pruned_failed"):
        op.add_column("pipelines", sa.Column(name, sa.BigInteger(), nullable=False, server_default="0"))
    op.create_index("ix_events_at", "events", ["at"])


def downgrade() -> None:
    op.drop_index("ix_events_at", "events")
    with op.batch_alter_table("pipelines") as batch:
        batch.drop_column("pruned_failed")
        batch.drop_column("pruned_completed")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("checkpoints_retained")
