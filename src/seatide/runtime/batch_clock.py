"""How long the micro-batch in flight has run, as the driver sees it between polls.

The driver polls its query's status (``isTriggerActive``) and judges a batch that runs past
``checkpoint.timeout``. ``Trigger.AvailableNow`` (BATCH with checkpoints), and a STREAMING
query whose batches take longer than its interval, run batches back to back: between two
of them the trigger does not look idle to a poll, so the clock restarts when the batch in
flight changes, not only when the trigger goes idle. Without that, a run of healthy 5 s
batches was reported as one checkpoint timed out after 60 s.
"""

from __future__ import annotations


class BatchClock:
    def __init__(self) -> None:
        self._batch: int | None = None
        self._since: float | None = None

    def running_for(self, trigger_active: bool, batch_id: int, now: float) -> float | None:
        """Seconds batch ``batch_id`` has been in flight; None while no trigger runs."""
        if not trigger_active:
            self._batch = self._since = None
            return None
        if batch_id != self._batch or self._since is None:
            self._batch, self._since = batch_id, now
        return now - self._since
