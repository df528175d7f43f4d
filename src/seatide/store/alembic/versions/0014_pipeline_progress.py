"""Each pipeline's own task progress: one stuck pipeline is not hidden by a healthy one.

``pipelines.progress_at``: when the driver last saw a Spark task of this pipeline's query
complete (its query's jobs, by their job group). The watchdog judges each pipeline by it and
by the pipeline's own newest checkpoint (issue 30, finding 10).

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("pipelines", sa.Column("progress_at", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pipelines") as batch:
        batch.drop_column("progress_at")
