"""The harness's free ports: two test processes never hand out the same one while the first
lives (its server may still be starting, or stop and start again on it: a coordinator lost its
port so in a CI run)."""

from __future__ import annotations

import multiprocessing

from seatide.testing import ports


def _draw(claims_dir: str, count: int, queue, hold) -> None:
    ports.PORT_CLAIMS_DIR = claims_dir
    ports._claims.clear()                 # a process of its own: none of its parent's claims
    ports.random.seed(7)                  # every process draws the same sequence
    queue.put([ports.free_port() for _ in range(count)])
    hold.wait(60)


def test_processes_drawing_the_same_ports_never_hand_one_out_twice_while_they_live(tmp_path):
    ctx = multiprocessing.get_context("fork")
    queue, hold = ctx.Queue(), ctx.Event()
    first = ctx.Process(target=_draw, args=(str(tmp_path), 40, queue, hold))
    second = ctx.Process(target=_draw, args=(str(tmp_path), 40, queue, hold))
    first.start()
    second.start()
    one, two = queue.get(timeout=60), queue.get(timeout=60)
    assert len(set(one)) == 40 and len(set(two)) == 40
    assert not set(one) & set(two)
    hold.set()
    first.join(timeout=60)
    second.join(timeout=60)
    # Both have ended: their claims went with them, and the same draw gets the same ports again.
    third = ctx.Process(target=_draw, args=(str(tmp_path), 40, queue, hold))
    third.start()
    three = queue.get(timeout=60)
    third.join(timeout=60)
    assert set(three) <= set(one) | set(two)
