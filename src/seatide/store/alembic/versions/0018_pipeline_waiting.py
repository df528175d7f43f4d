"""What a running pipeline's start waits for, as its driver says.

``pipelines.waiting``: where a sink of the job would remove data, the attempt's start waits until every
query has its first offsets (runtime/start_gate.py), as long as the job's own settings let it run; the
driver writes here what each pipeline waits for ("starting: pipeline 2 waits for its first offsets
(...)"), so job-info and the leader's stale and hung verdicts say why the start waits (outside review,
F3/F4). None once the start has settled, and whenever the pipeline starts again.

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("pipelines", sa.Column("waiting", sa.Text()))


def downgrade() -> None:
    with op.batch_alter_table("pipelines") as batch:
        batch.drop_column("waiting")
