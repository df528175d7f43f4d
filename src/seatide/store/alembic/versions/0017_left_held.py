"""What a release left on a source's server that no run will drop, kept until it is gone.

``left_held``: a slot.name whose owner a release could not tell, left retaining WAL (review finding 4
told it only in an event of the releasing run, which job-info, the events of the job id's current run
and a forgotten job's views no longer show: finding F2). Kept whatever became of the run and its
job row, until the leader finds the slot gone or owned by a run (coordinator/left_held_watch.py).

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "left_held",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(32)),
        sa.Column("incarnation", sa.Integer()),
        sa.Column("plugin_id", sa.String(64), nullable=False),
        sa.Column("connector", sa.String(64), nullable=False),
        sa.Column("holds", sa.String(255), nullable=False),
        sa.Column("retained_bytes", sa.BigInteger()),
        sa.Column("lost", sa.Boolean(), nullable=False),
        sa.Column("state", sa.String(64)),
        sa.Column("why", sa.Text(), nullable=False),
        sa.Column("settle", sa.Text(), nullable=False),
        sa.Column("config", sa.Text()),
        sa.Column("variables", sa.Text()),
        sa.Column("left_at", sa.Float(), nullable=False),
        sa.Column("measured_at", sa.Float(), nullable=False),
        sa.Column("error", sa.Text()),
    )
    op.create_index("ix_left_held_job", "left_held", ["job_id"])


def downgrade() -> None:
    op.drop_index("ix_left_held_job", "left_held")
    op.drop_table("left_held")
