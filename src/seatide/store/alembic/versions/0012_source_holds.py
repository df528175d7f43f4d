"""Long-running CDC: what a job's sources hold on their servers, and cancel-and-release.

``source_holds``: per CDC source of a job, the WAL its replication slot retains (Postgres-CDC)
or how far its binlog position is behind the server (MySQL-CDC), as the leader last measured
it, with a warning time once past the threshold. ``jobs.release`` and ``jobs.released_at``: a
user's "cancel and release" (REQUESTED, RELEASING, RELEASED); a released job resumes only fresh.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("release", sa.String(12), nullable=True))
    op.add_column("jobs", sa.Column("released_at", sa.Float(), nullable=True))
    op.create_index("ix_jobs_release", "jobs", ["release"])
    op.create_table(
        "source_holds",
        sa.Column("job_id", sa.String(64), primary_key=True),
        sa.Column("pipeline_id", sa.Integer(), primary_key=True),
        sa.Column("plugin_id", sa.String(64), primary_key=True),
        sa.Column("incarnation", sa.Integer(), nullable=False),
        sa.Column("connector", sa.String(64), nullable=False),
        sa.Column("holds", sa.String(255)),
        sa.Column("retained_bytes", sa.BigInteger()),
        sa.Column("lost", sa.Boolean(), nullable=False),
        sa.Column("state", sa.String(64)),
        sa.Column("error", sa.Text()),
        sa.Column("measured_at", sa.Float(), nullable=False),
        sa.Column("warned_at", sa.Float()),
    )


def downgrade() -> None:
    op.drop_table("source_holds")
    op.drop_index("ix_jobs_release", "jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("release")
        batch.drop_column("released_at")
