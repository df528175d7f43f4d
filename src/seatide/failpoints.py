"""Named failpoints for fault tests (in the manner of TigerBeetle's and FoundationDB's).

Set ``SEATIDE_FAILPOINTS="name=action,..."`` in a process's environment; when the code
reaches ``hit("name")`` the action runs:

* ``kill``      SIGKILL this process (a crash at exactly that point)
* ``hang``      stop making progress forever (a hung process that is still alive)
* ``sleep:S``   pause S seconds
* ``raise``     raise ``FailpointError`` (a failure the code must handle)
* ``once:ACTION:PATH``  do ACTION only if PATH does not exist yet (and create it): a crash
  that a retried attempt does not repeat

Unset, ``hit`` costs one dict lookup.
"""

from __future__ import annotations

import os
import signal
import time


class FailpointError(RuntimeError):
    pass


def _parse(spec: str) -> dict[str, str]:
    points = {}
    for item in spec.split(","):
        name, sep, action = item.strip().partition("=")
        if name and sep:
            points[name.strip()] = action.strip()
    return points


_POINTS = _parse(os.environ.get("SEATIDE_FAILPOINTS", ""))


def hit(name: str) -> None:
    action = _POINTS.get(name)
    if action is None:
        return
    if action.startswith("once:"):
        _, inner, marker = action.split(":", 2)
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
