"""A pytest plugin that keeps the fast tier honest: a test that starts a real driver,
coordinator, worker or local run must be marked ``cluster``.

``bash scripts/test -m "not cluster"`` is the tier a developer runs in a few minutes, with
Spark in the test process and no SeaTide process of its own. Every process a test starts
goes through ``subprocess.Popen`` (the cluster helpers, ``seatide run``, an in-process worker
launching its driver): an unmarked test that starts one of those commands fails, naming it
and the marker to add, unless the process refused to start (exit code 2: bad flags or a bad
job, before any store, Spark or job), which is what a fast test of a refusal checks.

``soak`` tests are cluster tests too: ``-m "not cluster"`` replaces the default
``-m "not soak"``, so each soak test is given the ``cluster`` marker as well; so is every
test that uses the ``cluster`` fixture or a module's shared one (``CLUSTER_FIXTURES``).
"""

from __future__ import annotations

import subprocess

import pytest

MARKER = "cluster"
# Fixtures that start real processes for the test (tests/cluster/conftest.py).
CLUSTER_FIXTURES = ("cluster", "shared_cluster", "module_cluster")
REFUSED = 2             # SeaTide's exit code for bad flags or a bad job: nothing was started
_started: dict[str, list[subprocess.Popen]] = {}     # test id -> cluster processes it started
_current: list[pytest.Item] = []
_popen_init = subprocess.Popen.__init__


def cluster_command(args) -> bool:
    """Whether ``args`` run a SeaTide driver, coordinator, worker, local run or chaos run
    (``python -m MODULE ...`` or a console script; a ``python -c`` look-alike is not one)."""
    if isinstance(args, (str, bytes)):
        return False
    argv = [str(a) for a in args]
    if "-m" in argv[:-1]:
        at = argv.index("-m")
        module, rest = argv[at + 1], argv[at + 2:]
    else:
        scripts = {"seatide": "seatide.cli.main", "seatide-seatunnel": "seatide.cli.seatunnel"}
        script = next((i for i, a in enumerate(argv) if a.rsplit("/", 1)[-1] in scripts), None)
        if script is None:
            return False
        module, rest = scripts[argv[script].rsplit("/", 1)[-1]], argv[script + 1:]
    if module in ("seatide.runtime.driver", "seatide.testing.chaos"):
        return True
    if module == "seatide.cli.main":
        return bool(rest) and rest[0] in ("run", "cluster")
    # seatunnel.sh's flags: -m/-e local is an embedded run, --check runs nothing
    return module == "seatide.cli.seatunnel" and "local" in rest and "--check" not in rest


def _watching_init(self, args, *rest, **kwargs) -> None:
    _popen_init(self, args, *rest, **kwargs)
    if _current and _current[-1].get_closest_marker(MARKER) is None and cluster_command(args):
        _started.setdefault(_current[-1].nodeid, []).append(self)


def pytest_configure(config: pytest.Config) -> None:
    subprocess.Popen.__init__ = _watching_init


def pytest_unconfigure(config: pytest.Config) -> None:
    subprocess.Popen.__init__ = _popen_init


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Before -m selects. A soak test is deselected by "not cluster" too, and so is a test
    # that asks for a cluster fixture (real coordinators and workers, tests/cluster).
    # A test that uses the shared session, even through another fixture, is a ``spark`` test.
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if item.get_closest_marker("soak") is not None or any(f in fixtures for f in CLUSTER_FIXTURES):
            if item.get_closest_marker(MARKER) is None:
                item.add_marker(MARKER)
        if "spark" in fixtures and item.get_closest_marker("spark") is None:
            item.add_marker("spark")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item):
    _current.append(item)
    try:
        yield
    finally:
        _current.pop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    started = [p for p in _started.pop(item.nodeid, []) if p.poll() != REFUSED]
    report = outcome.get_result()
    if started and report.passed:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} is not marked '{MARKER}' but started real SeaTide processes, "
                           f"which the fast tier (-m 'not {MARKER}') must not: mark it @pytest.mark.{MARKER}.\n"
                           + "\n".join(f"  {' '.join(map(str, p.args))[:200]}" for p in started))
