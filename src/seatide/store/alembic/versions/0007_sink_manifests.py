"""Sink commit decisions: ``sink_manifests``, one row per file-sink micro-batch decided.

The row is the batch's commit point (issue 9 item 1): written by the driver's attempt-fenced
transaction before any file is published, marked PUBLISHED once the files are in place.
Pruned by retention (PUBLISHED rows beyond ``checkpoint.retained``) and with the job's history.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sink_manifests",
        sa.Column("job_id", sa.String(64), primary_key=True),
        sa.Column("incarnation", sa.Integer(), primary_key=True),
        sa.Column("pipeline_id", sa.Integer(), primary_key=True),
        sa.Column("plugin_id", sa.String(64), primary_key=True),
        sa.Column("transaction_id", sa.String(255), primary_key=True),
        sa.Column("batch_id", sa.BigInteger(), nullable=False),
        sa.Column("attempt_id", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("manifest", sa.Text(), nullable=False),
        sa.Column("decided_at", sa.Float(), nullable=False),
        sa.Column("published_at", sa.Float(), nullable=True),
    )
    op.create_index("ix_sink_manifests_batch", "sink_manifests",
                    ["job_id", "incarnation", "pipeline_id", "plugin_id", "batch_id"])


def downgrade() -> None:
    op.drop_index("ix_sink_manifests_batch", table_name="sink_manifests")
    op.drop_table("sink_manifests")
