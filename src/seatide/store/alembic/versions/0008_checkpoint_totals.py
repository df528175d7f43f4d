"""Checkpoint totals on the pipeline row: what lists and the tick read instead of counting.

At a thousand running jobs the running-jobs list spent most of its time counting every
retained checkpoint row by status and seeking each job's newest one, and the leader's tick
sought each job's newest checkpoint time in every pass. The driver's commit transaction
writes the pipeline row anyway, so it now keeps there:

* ``checkpoints_completed`` / ``checkpoints_failed``: every checkpoint the pipeline recorded,
  rows pruned by retention included (which therefore no longer touches the counts);
* ``last_checkpoint_id`` / ``last_checkpoint_at``: its newest COMPLETED checkpoint.

A savepoint (its row says pipeline 0: it covers every pipeline) is the job's, not a pipeline's:
``ix_checkpoints_savepoints``, partial, finds a job's few without walking its checkpoints.

Existing rows are filled from the checkpoint rows (savepoints aside) plus ``pruned_completed`` /
``pruned_failed``, which are no longer written after this revision.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

TOTALS = ("checkpoints_completed", "checkpoints_failed")


def upgrade() -> None:
    for name in TOTALS:
        op.add_column("pipelines", sa.Column(name, sa.BigInteger(), nullable=False, server_default="0"))
    op.add_column("pipelines", sa.Column("last_checkpoint_id", sa.BigInteger(), nullable=True))
    op.add_column("pipelines", sa.Column("last_checkpoint_at", sa.Float(), nullable=True))
    # Correlated subqueries: the same statement on SQLite and PostgreSQL, one pass over the
    # pipelines, each count an index walk (ix_checkpoints_pipeline).
    of_pipeline = ("c.job_id = pipelines.job_id AND c.incarnation = pipelines.incarnation "
                   "AND c.pipeline_id = pipelines.pipeline_id AND c.kind = 'CHECKPOINT'")
    op.execute(f"""
        UPDATE pipelines SET
          checkpoints_completed = pruned_completed
            + (SELECT count(*) FROM checkpoints c WHERE {of_pipeline} AND c.status = 'COMPLETED'),
          checkpoints_failed = pruned_failed
            + (SELECT count(*) FROM checkpoints c WHERE {of_pipeline} AND c.status = 'FAILED'),
          last_checkpoint_id = (SELECT max(c.checkpoint_id) FROM checkpoints c
                                WHERE {of_pipeline} AND c.status = 'COMPLETED')""")
    op.execute("""
        UPDATE pipelines SET last_checkpoint_at = (
          SELECT c.created_at FROM checkpoints c WHERE c.job_id = pipelines.job_id
            AND c.incarnation = pipelines.incarnation AND c.checkpoint_id = pipelines.last_checkpoint_id)
        WHERE last_checkpoint_id IS NOT NULL""")
    savepoint = sa.text("kind = 'SAVEPOINT'")
    op.create_index("ix_checkpoints_savepoints", "checkpoints", ["job_id", "incarnation", "checkpoint_id"],
                    postgresql_where=savepoint, sqlite_where=savepoint)


def downgrade() -> None:
    op.drop_index("ix_checkpoints_savepoints", table_name="checkpoints")
    with op.batch_alter_table("pipelines") as batch:
        for name in (*TOTALS, "last_checkpoint_id", "last_checkpoint_at"):
            batch.drop_column(name)
