"""Paths built from what a user sent (job ids, attempt ids, savepoint ids) stay under their root.

Ids are checked for their form where they enter (``store.job_ids.check_job_id``); ``under`` is
the second lock: it joins, normalises and refuses any result outside ``root``, before
anything is written, read or removed there.
"""

from __future__ import annotations

import os

from seatide.store.job_ids import check_job_id


class PathOutsideRoot(ValueError):
    """A path made from request input would leave its root (the request is refused, 400)."""


def under(root: str, *parts: str | int) -> str:
    """``root/part/...``, normalised; ``PathOutsideRoot`` unless it is strictly inside ``root``."""
    base = os.path.normpath(os.path.abspath(root))
    names = [str(part) for part in parts]
    if any(not name or "\0" in name or os.path.isabs(name) for name in names):
        raise PathOutsideRoot(f"{'/'.join(names)!r} is not a relative name under {base}")
    path = os.path.normpath(os.path.join(base, *names))
    if os.path.commonpath([base, path]) != base or path == base:
        raise PathOutsideRoot(f"{'/'.join(names)!r} does not name a path under {base}")
    return path


def driver_log_path(data_dir: str, job_id: str, attempt_id: int | str) -> str:
    """Where a worker writes the log of one driver: ``<data_dir>/logs/<job>/attempt-<id>.log``."""
    return under(os.path.join(data_dir, "logs"), check_job_id(job_id), f"attempt-{int(attempt_id)}.log")
