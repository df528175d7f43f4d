"""The newest batch each pipeline began writing to its sinks, and its lineage.

``pipelines.started_batch`` and ``pipelines.started_lineage``: written by the driver before the
first sink write of each batch (``store/batch_starts.py``), so a sink that commits in its own
system (Jdbc, Redis, Http) leaves a store record of its batches as a file sink's decision does, and
a checkpoint directory put back older than them is refused (outside review 3).

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("pipelines", sa.Column("started_batch", sa.BigInteger(), nullable=True))
    op.add_column("pipelines", sa.Column("started_lineage", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pipelines") as batch:
        batch.drop_column("started_lineage")
        batch.drop_column("started_batch")
