"""The newest checkpoint's duration and row count on the pipeline row, beside its id and time.

The running-jobs list shows each job's newest checkpoint: its time, how long it took and how
many rows it committed. Revision 0008 put the id and time on the pipeline row; the rest still
meant joining a thousand jobs to the checkpoint rows, and PostgreSQL's planner chose to hash
the whole checkpoints table for it (47 ms at 100,000 rows, 700 ms with a prepared statement's
generic plan). The driver's commit writes the pipeline row anyway; now it keeps these two too,
and a list reads jobs and pipelines only.

Existing rows are filled from the checkpoint that ``last_checkpoint_id`` names.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

FACTS = {"last_checkpoint_duration_ms": "duration_ms", "last_checkpoint_rows": "rows"}


def upgrade() -> None:
    for name in FACTS:
        op.add_column("pipelines", sa.Column(name, sa.BigInteger(), nullable=True))
    newest = ("FROM checkpoints c WHERE c.job_id = pipelines.job_id AND c.incarnation = pipelines.incarnation "
              "AND c.checkpoint_id = pipelines.last_checkpoint_id")
    assignments = ", ".join(f"{name} = (SELECT c.{column} {newest})" for name, column in FACTS.items())
    op.execute(f"UPDATE pipelines SET {assignments} WHERE last_checkpoint_id IS NOT NULL")


def downgrade() -> None:
    with op.batch_alter_table("pipelines") as batch:
        for name in FACTS:
            batch.drop_column(name)
