"""A coordinator or worker kills only its own drivers: same store, same job, same attempt."""

from seatide.coordinator.service import is_driver_of

STORE = "sqlite:////data/a/state.db"


def _argv(store=STORE, job="orders", attempt="3"):
    return ["/venv/bin/python", "-m", "seatide.runtime.driver", "driver", "--store", store,
            "--job-id", job, "--attempt", attempt, "--heartbeat-interval", "1"]


def test_the_attempts_own_driver_is_recognised():
    assert is_driver_of(_argv(), STORE, "orders", 3)
    assert is_driver_of(_argv(store="postgresql://h/db"), "postgresql+psycopg://h/db", "orders", 3)


def test_drivers_of_other_stores_jobs_or_attempts_and_other_processes_are_not():
    assert not is_driver_of(_argv(store="sqlite:////data/b/state.db"), STORE, "orders", 3)
    assert not is_driver_of(_argv(job="other"), STORE, "orders", 3)
    assert not is_driver_of(_argv(attempt="13"), STORE, "orders", 3)
    assert not is_driver_of(["vim", "driver", "3", "orders"], STORE, "orders", 3)
    assert not is_driver_of(_argv()[:-6], STORE, "orders", 3)
