"""Which source holds belong to a pipeline the job's current config leaves out.

``source_holds.left_out``: the leader measures the sources of pipelines a resume left out on
purpose (``--fallback fresh``) from the config of the incarnation where they last ran
(coordinator/left_out_sources.py): their replication slots retain WAL as any other's, and
job-info and the UI say they are left out.

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("source_holds", sa.Column("left_out", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("source_holds") as batch:
        batch.drop_column("left_out")
