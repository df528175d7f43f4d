"""A failpoint armed for one scope (``name@scope``) meets that scope alone."""

from __future__ import annotations

import threading

import pytest

from seatide import failpoints


def test_a_point_armed_for_one_scope_acts_there_only(monkeypatch):
    monkeypatch.setitem(failpoints._POINTS, "driver.batch_start@4", "raise")
    failpoints.hit("driver.batch_start", scope=3)
    failpoints.hit("driver.batch_start")
    with pytest.raises(failpoints.FailpointError, match="driver.batch_start@4"):
        failpoints.hit("driver.batch_start", scope=4)


def test_a_scoped_gate_counts_and_holds_its_scope_while_others_pass(monkeypatch, tmp_path):
    gate = tmp_path / "gate"
    monkeypatch.setitem(failpoints._POINTS, "driver.batch_start@1", f"gate:1:{gate}")
    monkeypatch.setitem(failpoints._HITS, "driver.batch_start@1", 0)
    failpoints.hit("driver.batch_start", scope=1)          # its one pass
    held = threading.Thread(target=failpoints.hit, args=("driver.batch_start",), kwargs={"scope": 1})
    held.start()
    for _ in range(5):
        failpoints.hit("driver.batch_start", scope=0)      # another pipeline is never held
    held.join(0.3)
    assert held.is_alive(), "the second hit of the gated scope went through a closed gate"
    gate.touch()
    held.join(10)
    assert not held.is_alive()
    assert failpoints._HITS["driver.batch_start@1"] == 2
