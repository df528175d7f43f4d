"""Exactly-once sinks: a per-sink log of committed micro-batches.

Layout, under the pipeline's checkpoint directory::

    sinks/<plugin_id>/intent/<batch>.json      what an attempt is about to publish
    sinks/<plugin_id>/commit/<batch>.json      the commit point: state after the batch

The commit file is moved into place with ``os.replace`` after everything the batch
publishes, so it is the batch's single atomic commit step. A replayed batch whose
commit exists is skipped; one with only an intent had crashed mid-publish, and the
writer's ``abort_batch`` removes what that intent lists before the batch is redone.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from typing import Callable

from seatide.plugin.base import Batch, SinkWriter

_BATCH_FILE = re.compile(r"^(\d+)\.json$")


def write_json_atomic(path: str, payload: dict) -> None:
    """Write a small JSON file so readers see the old or the new content, never a part."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    with os.fdopen(fd, "w") as handle:
        json.dump(payload, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def read_json(path: str) -> dict | None:
    try:
        with open(path) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None


@dataclass
class SinkCommitLog:
    root: str   # <checkpoint dir>/sinks/<plugin_id>

    def _path(self, area: str, batch_id: int) -> str:
        return os.path.join(self.root, area, f"{batch_id}.json")

    def committed(self, batch_id: int) -> dict | None:
        return read_json(self._path("commit", batch_id))

    def intent(self, batch_id: int) -> dict | None:
        return read_json(self._path("intent", batch_id))

    def record_intent(self, batch_id: int, intent: dict) -> None:
        write_json_atomic(self._path("intent", batch_id), intent)

    def commit(self, batch_id: int, state: dict) -> None:
        write_json_atomic(self._path("commit", batch_id), state)
        try:
            os.remove(self._path("intent", batch_id))
        except FileNotFoundError:
            pass

    def batch_ids(self) -> list[int]:
        try:
            names = os.listdir(os.path.join(self.root, "commit"))
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for m in map(_BATCH_FILE.match, names) if m)

    def latest_state(self, before: int | None = None) -> dict:
        """State of the newest committed batch (older than ``before`` when given)."""
        ids = [b for b in self.batch_ids() if before is None or b < before]
        return (self.committed(ids[-1]) or {}) if ids else {}

    def prune(self, keep_from: int) -> None:
        """Forget commits older than ``keep_from``; Spark will never replay them."""
        ids = self.batch_ids()
        for batch_id in ids[:-1]:   # the newest always stays: it carries the running state
            if batch_id < keep_from:
                os.remove(self._path("commit", batch_id))


@dataclass
class BatchResult:
    batch_id: int
    state: dict
    replayed: bool     # True: already committed by an earlier attempt; nothing was written


def write_exactly_once(writer: SinkWriter, log: SinkCommitLog, df, batch_id: int,
                       transaction_id: str, before_commit: Callable[[], None] | None = None) -> BatchResult:
    """Run one batch through a sink at most once, whatever crashed before.

    ``before_commit`` runs between publishing and the commit point (the driver uses it
    to check that its attempt is still current, so a fenced-off zombie never commits).
    """
    done = log.committed(batch_id)
    if done is not None:
        return BatchResult(batch_id, done, replayed=True)
    leftover = log.intent(batch_id)
    if leftover is not None:
        writer.abort_batch(batch_id, leftover)
    batch = Batch(batch_id=batch_id, transaction_id=transaction_id,
                  previous_state=log.latest_state(before=batch_id),
                  record_intent=lambda intent: log.record_intent(batch_id, intent),
                  fence=before_commit or (lambda: None))
    state = writer.write_batch(df, batch)
    if before_commit is not None:
        before_commit()
    log.commit(batch_id, state)
    return BatchResult(batch_id, state, replayed=False)
