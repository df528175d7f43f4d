"""Indexes for a thousand jobs: checkpoints by status within a job's incarnation.

The leader's tick reads each running job's newest COMPLETED checkpoint time, and the
running-jobs list its newest COMPLETED checkpoint and its counts by status. With these the
newest is one index seek per job and the counts an index-only walk, instead of reading every
retained checkpoint row (100 per pipeline by default) of every running job.

Revision ID: 0005
Revises: 0004
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_checkpoints_status", "checkpoints", ["job_id", "incarnation", "status", "checkpoint_id"],
                    if_not_exists=True)
    op.create_index("ix_checkpoints_completed_at", "checkpoints", ["job_id", "incarnation", "status", "created_at"],
                    if_not_exists=True)


def downgrade() -> None:
    op.drop_index("ix_checkpoints_completed_at", "checkpoints")
    op.drop_index("ix_checkpoints_status", "checkpoints")
