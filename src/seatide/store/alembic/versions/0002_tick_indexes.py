"""Indexes for the reconcile tick: jobs by status, attempts by state (``schema_version`` 2).

Revision ID: 0002
Revises: 0001
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_jobs_status", "jobs", ["status"], if_not_exists=True)
    op.create_index("ix_attempts_state", "attempts", ["state"], if_not_exists=True)


def downgrade() -> None:
    op.drop_index("ix_attempts_state", "attempts")
    op.drop_index("ix_jobs_status", "jobs")
