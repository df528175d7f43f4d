"""Job names recorded masked: rows recorded before submit masked them are masked once, here.

Since review 8 F5 a job's name is recorded as every view shows it (``intents.submit``: a name made of a
secret variable, ``job.name = "nightly-${tenant}"``, is masked before it is stored), so /metrics' job_name
labels and the source holds' labels read the stored name and no config. A row recorded before that kept the
name in clear, and those views showed it. Each such row is masked with its own config's secrets, the rule
submit applies, once: the stored name then holds no secret, whichever view shows it.

Revision ID: 0020
Revises: 0019
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

_jobs = sa.table("jobs", sa.column("job_id", sa.String), sa.column("name", sa.String),
                 sa.column("config", sa.Text), sa.column("variables", sa.Text))


def upgrade() -> None:
    from seatide.secrets import mask_message, secret_values

    conn = op.get_bind()
    for row in conn.execute(sa.select(_jobs.c.job_id, _jobs.c.name, _jobs.c.config, _jobs.c.variables)).all():
        if not row.name or not row.config:
            continue
        try:
            variables = json.loads(row.variables or "{}")
        except ValueError:
            variables = {}
        masked = mask_message(row.name, secret_values(row.config, variables))
        if masked != row.name:
            conn.execute(sa.update(_jobs).where(_jobs.c.job_id == row.job_id).values(name=masked))


def downgrade() -> None:
    pass     # a masked name cannot be unmasked: the clear one is not kept anywhere
