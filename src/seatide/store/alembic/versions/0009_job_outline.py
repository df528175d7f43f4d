"""The job's outline: its env options and DAG as JSON, made when it is recorded.

SeaTunnel's job lists show every job's env and DAG; reading them back from the config text
parsed HOCON again, 35-50 ms a job (plan/outline.py). Jobs recorded before this revision keep
NULL and are parsed on first read.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("outline", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("outline")
