"""Recorded environments: a job's row may carry the environment its submitter recorded (outside review M1).

No table or column changes: ``jobs.variables`` already holds the user's variables, and a row may now also hold
the ``$env`` mark and ``$env.NAME`` entries (config/job_environment.py), which every process of this version
reads as the job's environment, never its own. A SeaTide from before this revision knows no mark: it would fill
a marked job's ``${NAME}`` from its own process's environment (a coordinator's ``${PGPASSWORD}`` in the job,
and values other than the ones submitted) and could take ``$env.NAME`` for a user's variable. This revision is
the gate that keeps it off such a store: a SeaTide that does not know a store's revision refuses to open it
("newer than this SeaTide; upgrade SeaTide", store/migrations.py), so every driver, worker and coordinator of
the older version started after the first new process opened the store stops at its opening. The upgrade
itself changes nothing: rows stored before it carry no mark and are read with the process's environment, as
they always were.

Revision ID: 0021
Revises: 0020
"""

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass     # a meaning, not a schema: rows from now on may be marked (see above)


def downgrade() -> None:
    pass     # an older SeaTide must not read the marked rows this one wrote: go back only with them gone
