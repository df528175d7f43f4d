"""The harness's free ports: two test processes never hand out the same one while a server of
the first may still be starting (a coordinator lost its port so in a CI run)."""

from __future__ import annotations

import multiprocessing
import os
import time

from seatide.testing import ports


def _draw(claims_dir: str, count: int, queue) -> None:
    ports.PORT_CLAIMS_DIR = claims_dir
    ports.random.seed(7)                  # both processes draw the same sequence
    queue.put([ports.free_port() for _ in range(count)])


def test_two_processes_drawing_the_same_ports_never_hand_one_out_twice(tmp_path):
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_draw, args=(str(tmp_path), 40, queue)) for _ in range(2)]
    for proc in procs:
        proc.start()
    first, second = queue.get(timeout=60), queue.get(timeout=60)
    for proc in procs:
        proc.join(timeout=60)
    assert len(set(first)) == 40 and len(set(second)) == 40
    assert not set(first) & set(second)


def test_a_claim_keeps_a_port_until_it_is_old(tmp_path, monkeypatch):
    monkeypatch.setattr(ports, "PORT_CLAIMS_DIR", str(tmp_path))
    assert ports._claim(20001)
    assert not ports._claim(20001)
    old = time.time() - ports.PORT_CLAIM_S - 5
    os.utime(tmp_path / "20001", (old, old))
    assert ports._claim(20001)
    assert not ports._claim(20001)
