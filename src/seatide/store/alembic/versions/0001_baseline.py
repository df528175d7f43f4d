"""Baseline: the schema SeaTide created before Alembic (``schema_version`` 1).

A store written by that version is stamped here when it is first opened by this one,
then upgraded. A fresh store never runs this: it is built from the current metadata and
stamped at head (Alembic's recipe for a new database), so nothing needs to be done here.

Revision ID: 0001
"""

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    raise NotImplementedError("SeaTide stores are never downgraded below the baseline")
