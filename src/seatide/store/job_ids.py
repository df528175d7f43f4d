"""A job id's form, checked where an id enters, and the refusal a request about a job gets.

Apart from ``jobs.py`` because the path helpers (``paths.py``) check ids too, and ``jobs.py``
builds its paths with them: with the check in ``jobs.py`` the three modules imported each other.
"""

from __future__ import annotations

import re


class JobRefused(Exception):
    """A request about a job cannot be honoured; the message says why and what to do."""


class RestoreRefused(JobRefused):
    """The checkpoint to resume from is missing, unreadable or does not fit the job. Here, beside
    its base, because the modules a resume plans with (``restore.py``, ``owed_moves.py``,
    ``release_line.py``) all refuse with it and ``restore.py`` imports the other two."""


class BadJobId(JobRefused):
    """A job id that is not a plain name (the REST API answers 400)."""


# Job ids name directories (checkpoints, logs): a plain name, never a path. At most 64
# characters, the width of the store's job_id columns.
JOB_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_job_id(job_id: str) -> str:
    if not isinstance(job_id, str) or not JOB_ID_PATTERN.match(job_id) or job_id in (".", ".."):
        shown = repr(job_id) if len(str(job_id)) <= 60 else repr(str(job_id)[:57]) + "..."
        raise BadJobId(f"job id {shown} is not allowed: use 1 to 64 letters, digits, '.', '_' or '-', "
                       "starting with a letter or digit")
    return job_id
