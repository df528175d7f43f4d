"""Recorded environments: a job's row may carry the environment its submitter recorded (outside review M1, F3).

A row may now hold the ``$env`` mark and ``$env.NAME`` entries (config/job_environment.py), which every process of
this version reads as the job's environment, never its own. A SeaTide from before knows no mark: it would fill a
marked job's ``${NAME}`` from its own process's environment. Two things keep it from reading one:

* the revision: a SeaTide that does not know a store's revision refuses to open it (store/migrations.py), so no
  older process *starts* on the store once a process of this version has opened it;
* ``nodes.features``: each process of this version says on its presence row what it can do
  (store/node_features.py). Older processes *already running* have no such word: the leader assigns no job to
  a worker without it, and no job is recorded with the mark while a coordinator without it is alive
  (docs/operations.md, *Upgrading*).

Rows stored before carry no mark and are read with the process's environment, as they always were.

Revision ID: 0021
Revises: 0020
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("nodes", sa.Column("features", sa.String(256), nullable=True))


def downgrade() -> None:
    # An older SeaTide must not read the marked rows this one wrote: go back only with them gone.
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("features")
