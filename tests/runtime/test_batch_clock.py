"""The driver's clock of the micro-batch in flight (judged against checkpoint.timeout)."""

import pytest

from seatide.runtime.batch_clock import BatchClock


def test_back_to_back_batches_each_start_their_own_clock():
    # availableNow: the trigger never looks idle between batches; ten 5 s batches are not
    # one 50 s checkpoint.
    clock = BatchClock()
    for batch_id in range(10):
        start = batch_id * 5.0
        assert clock.running_for(True, batch_id, start) == 0.0
        assert clock.running_for(True, batch_id, start + 4.9) == pytest.approx(4.9)


def test_a_slow_batch_keeps_counting_across_polls():
    clock = BatchClock()
    clock.running_for(True, 3, 100.0)
    assert clock.running_for(True, 3, 161.0) == 61.0


def test_an_idle_trigger_stops_the_clock_and_the_same_batch_starts_it_afresh():
    clock = BatchClock()
    clock.running_for(True, 7, 10.0)
    assert clock.running_for(False, 7, 20.0) is None
    assert clock.running_for(True, 7, 30.0) == 0.0
