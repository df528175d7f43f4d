"""Events by kind: the overview looks for RELEASE_LEFT_HELD events no ``left_held`` row stands for.

Review 2 F1: a slot left before revision 0017, or by a leader of the version before it during a
rolling upgrade, is told by its event alone; every overview and job-info shows those until they are
settled or dismissed (store/left_held.py ``told_only``), so they are found without reading every event.

Revision ID: 0019
Revises: 0018
"""

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_events_kind", "events", ["kind", "seq"])


def downgrade() -> None:
    op.drop_index("ix_events_kind", "events")
