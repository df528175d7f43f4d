"""Events name their run: a job id used again is a new run, and its event log is its own.

``events.run_id``: the run an event is about (``store/runs.py``). Events outlive the other rows
of a run (history expiry keeps them as the audit trail), and a job id submitted again after its
rows were forgotten starts at incarnation 1 once more, so the incarnation cannot tell two
runs' events apart. Existing events since a job's latest submission are its current run's;
older ones keep no run (shown only where the job is gone).

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("events", sa.Column("run_id", sa.String(32), nullable=True))
    op.execute("""
        UPDATE events SET run_id = (SELECT jobs.run_id FROM jobs WHERE jobs.job_id = events.job_id)
        WHERE events.seq >= (SELECT max(e.seq) FROM events e
                             WHERE e.job_id = events.job_id AND e.kind = 'JOB_SUBMITTED')
    """)


def downgrade() -> None:
    with op.batch_alter_table("events") as batch:
        batch.drop_column("run_id")
