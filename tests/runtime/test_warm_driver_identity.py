"""A warm driver becomes its attempt's driver to anyone who reads the process table: it
writes the attempt over the placeholders of its own command line (real processes)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from seatide.coordinator.service import is_driver_of
from seatide.runtime.warm_driver import fits_command_line, placeholder_args

STORE = "sqlite:////data/a/state.db"
_NAME_ON_REQUEST = """
import sys
from seatide.runtime.warm_driver import name_attempt_in_command_line
print("waiting", flush=True)
job, attempt = sys.stdin.readline().split()
try:
    name_attempt_in_command_line(job, int(attempt))
    print("named", flush=True)
except RuntimeError as exc:
    print(exc, flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def idle_warm_process():
    proc = subprocess.Popen([sys.executable, "-c", _NAME_ON_REQUEST, "seatide.runtime.driver", "warm",
                             "--store", STORE, *placeholder_args(), "--ready-fd", "3"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "waiting"
    yield proc
    proc.kill()
    proc.wait()


def _cmdline(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        return [arg.decode() for arg in handle.read().split(b"\0")]


def _ask(proc, job_id: str, attempt_id: int) -> str:
    proc.stdin.write(f"{job_id} {attempt_id}\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


def test_an_idle_warm_driver_is_nobodys_driver_then_its_attempts_only(idle_warm_process):
    pid = idle_warm_process.pid
    assert not any(is_driver_of(_cmdline(pid), STORE, job, 0) for job in ("orders", "~" * 64))
    assert _ask(idle_warm_process, "orders", 17) == "named"
    argv = _cmdline(pid)
    assert is_driver_of(argv, STORE, "orders", 17)
    assert not is_driver_of(argv, STORE, "orders", 1)
    assert not is_driver_of(argv, STORE, "order", 17)
    assert not is_driver_of(argv, "sqlite:////data/b/state.db", "orders", 17)
    assert argv[argv.index("--ready-fd") + 1] == "3"        # the flags after the slots are intact


def test_the_longest_job_id_and_attempt_fit(idle_warm_process):
    job_id, attempt_id = "j" * 64, 10 ** 19
    assert fits_command_line(job_id, attempt_id)
    assert _ask(idle_warm_process, job_id, attempt_id) == "named"
    assert is_driver_of(_cmdline(idle_warm_process.pid), STORE, job_id, attempt_id)


def test_a_job_id_longer_than_the_slot_is_refused_not_truncated(idle_warm_process):
    assert not fits_command_line("j" * 65, 1)
    assert "no room for --job-id" in _ask(idle_warm_process, "j" * 65, 1)
    assert not is_driver_of(_cmdline(idle_warm_process.pid), STORE, "j" * 64, 1)
