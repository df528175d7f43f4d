"""Runs: an identity per submission that no later run shares; attempt ids never reused.

A job id may be submitted again once its history has expired, and its rows are gone then:
the new run started again at incarnation 1, attempt numbering and the same checkpoint
directories, so a late step of the old run (an expiry by a slow leader, a zombie's report)
could not be told from the new one's. ``jobs.run_id`` names the run (kept by a resume), and
what a run creates outside the store carries it. ``job_results.run_id`` says which run a
result (and so a cleanup or expiry) is about, and the result keeps the run's job text, so
its sources can release their slots once a new run has replaced the job row.

SQLite gives a deleted row's id to the next insert unless the table is AUTOINCREMENT; the
attempts table is rebuilt so, its sequence starting above every id it holds. (Ids deleted
above the highest one left before this upgrade are not known to it.)

Jobs submitted before this revision keep ``run_id`` NULL and their names as they were.

``attempts.charged``: an attempt that ended because the store was out of its reach (not by
anything of the job's) is retried without counting against ``job.retry.times``.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("run_id", sa.String(32), nullable=True))
    op.add_column("job_results", sa.Column("run_id", sa.String(32), nullable=True))
    op.add_column("job_results", sa.Column("config", sa.Text(), nullable=True))
    op.add_column("job_results", sa.Column("variables", sa.Text(), nullable=True))
    op.add_column("attempts", sa.Column("charged", sa.Boolean(), nullable=False, server_default=sa.true()))
    if op.get_bind().dialect.name == "sqlite":
        with op.batch_alter_table("attempts", recreate="always",
                                  table_kwargs={"sqlite_autoincrement": True}) as batch:
            batch.alter_column("attempt_id", existing_type=sa.Integer(), autoincrement=True)


def downgrade() -> None:
    with op.batch_alter_table("job_results") as batch:
        for name in ("run_id", "config", "variables"):
            batch.drop_column(name)
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("run_id")
    with op.batch_alter_table("attempts") as batch:
        batch.drop_column("charged")
