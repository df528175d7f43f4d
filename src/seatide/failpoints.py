"""Named failpoints for fault tests (in the manner of TigerBeetle's and FoundationDB's).

Set ``SEATIDE_FAILPOINTS="name=action,..."`` in a process's environment; when the code
reaches ``hit("name")`` the action runs:

* ``kill``      SIGKILL this process (a crash at exactly that point)
* ``hang``      stop making progress forever (a hung process that is still alive)
* ``sleep:S``   pause S seconds
* ``raise``     raise ``FailpointError`` (a failure the code must handle)
* ``once:ACTION:PATH``  do ACTION only if PATH does not exist yet (and create it): a crash
  that a retried attempt does not repeat
* ``gate:N:PATH``  let the first N hits in this process pass, then hold every later hit until
  PATH exists (or the caller's ``released()`` says to go on, e.g. a stop was requested). Tests
  use it to hold a job mid-way for as long as they need, on a fast machine or a slow one.

A point hit with a ``scope`` (a pipeline's id) can also be armed as ``name@scope``: that
scope alone meets the action, e.g. one pipeline held while the others run to their end.

Tests may also arm points for one job's drivers alone, so that a test holding or crashing
its job's driver can share a cluster with other tests' jobs: a worker started with
``SEATIDE_JOB_FAILPOINTS=DIR`` (a testing switch; nothing else sets it) gives the driver of
job ID the points in the file ``DIR/ID`` after its own (``armed_for_job``). A job file cannot
arm one: only whoever starts the worker chooses DIR.

Unset, ``hit`` costs one dict lookup.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Callable


class FailpointError(RuntimeError):
    pass


def _parse(spec: str) -> dict[str, str]:
    points = {}
    for item in spec.split(","):
        name, sep, action = item.strip().partition("=")
        if name and sep:
            points[name.strip()] = action.strip()
    return points


POINTS_ENV = "SEATIDE_FAILPOINTS"
JOB_POINTS_ENV = "SEATIDE_JOB_FAILPOINTS"

_POINTS = _parse(os.environ.get(POINTS_ENV, ""))
_HITS: dict[str, int] = {}


def armed_for_job(job_id: str) -> str:
    """The points armed for ``job_id``'s drivers under the testing switch; "" for none."""
    directory = os.environ.get(JOB_POINTS_ENV)
    if not directory or job_id in ("", ".", "..") or os.path.basename(job_id) != job_id:
        return ""
    try:
        with open(os.path.join(directory, job_id)) as handle:
            return handle.read().strip()
    except OSError:
        return ""


def hit(name: str, released: Callable[[], bool] | None = None, scope: object = None) -> None:
    if scope is not None and f"{name}@{scope}" in _POINTS:
        name = f"{name}@{scope}"
    action = _POINTS.get(name)
    if action is None:
        return
    if action.startswith("gate:"):
        _gate(name, action, released)
        return
    if action.startswith("once:"):
        inner, marker = action[len("once:"):].rsplit(":", 1)    # ACTION may hold a colon (sleep:S)
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        action = inner
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)
    elif action == "hang":
        while True:
            time.sleep(3600)
    elif action.startswith("sleep:"):
        time.sleep(float(action.split(":", 1)[1]))
    elif action == "raise":
        raise FailpointError(f"failpoint {name}")


def _gate(name: str, action: str, released: Callable[[], bool] | None) -> None:
    _, passes, path = action.split(":", 2)
    count = _HITS.get(name, 0)
    _HITS[name] = count + 1
    if count < int(passes):
        return
    while not os.path.exists(path) and not (released is not None and released()):
        time.sleep(0.05)
