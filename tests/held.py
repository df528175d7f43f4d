"""A failpoint that holds one thread of a test between two steps (failpoints' gate), never a sleep."""

from __future__ import annotations


class Held:
    """A failpoint that holds the first thread to reach it (failpoints' gate) until ``release``;
    once it was reached, later hits pass."""

    def __init__(self, monkeypatch, point: str, path):
        from seatide import failpoints

        self.monkeypatch, self.point, self.path = monkeypatch, point, str(path)
        monkeypatch.setitem(failpoints._POINTS, point, f"gate:0:{self.path}")
        monkeypatch.setitem(failpoints._HITS, point, 0)

    def reached(self, timeout: float = 180.0) -> None:
        from seatide import failpoints
        from seatide.testing.cluster import wait_for

        wait_for(lambda: failpoints._HITS[self.point] >= 1, timeout, 0.05, f"a thread at {self.point}")
        self.monkeypatch.delitem(failpoints._POINTS, self.point)

    def release(self) -> None:
        open(self.path, "w").close()
