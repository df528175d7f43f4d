"""The progress watchdog: a job whose tasks stop moving while its driver heartbeats is HUNG.

* ``jobs.progress_timeout_s`` / ``on_hung`` / ``hung_since``: the job's window, its policy
  and the flag (NULL timeout: a job recorded before this revision is not watched).
* ``attempts.progress_at`` / ``tasks_done``: the driver's last task progress.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("progress_timeout_s", sa.Float(), nullable=True))
    op.add_column("jobs", sa.Column("on_hung", sa.String(8), nullable=False, server_default="restart"))
    op.add_column("jobs", sa.Column("hung_since", sa.Float(), nullable=True))
    op.add_column("attempts", sa.Column("progress_at", sa.Float(), nullable=True))
    op.add_column("attempts", sa.Column("tasks_done", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.drop_column("tasks_done")
        batch.drop_column("progress_at")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("hung_since")
        batch.drop_column("on_hung")
        batch.drop_column("progress_timeout_s")
