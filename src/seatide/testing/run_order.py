"""A pytest plugin: the order a run takes its tests in, so that no test process ends the run
alone with a long test.

pytest-xdist's ``worksteal`` hands the first of N test processes the first 1/N of the
collection, the next one the next 1/N, and so on; a process that runs out steals the last
half of the longest queue left. So each process's share should start with its longest tests
and end with short ones: what is stolen, and what is left at the end, is then a short test.

The length of a test is guessed from its tier (``seatide/testing/tiers.py``), not measured:
a ``cluster`` test starts real processes (10-50 s), a ``spark`` test uses the shared session
(about a second), the rest take a fraction of one. Whole modules are placed, never split
between shares unless they are of the fast tier, so a module's fixture is set up once. The
heavy modules are dealt out to the shares, heaviest first, each to the lightest share so far;
the fast tier fills every share to the same number of tests.
"""

from __future__ import annotations

import pytest

# Guessed seconds per test of each tier; only their ratios matter.
SECONDS = {"cluster": 20.0, "spark": 1.0, "fast": 0.2}


def _tier(item: pytest.Item) -> str:
    for tier in ("cluster", "spark"):
        if item.get_closest_marker(tier) is not None:
            return tier
    return "fast"


def _modules(items: list[pytest.Item]) -> dict[str, list[pytest.Item]]:
    by_module: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_module.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    return by_module


def share_out(items: list[pytest.Item], shares: int) -> list[pytest.Item]:
    """``items`` in the order worksteal should get them for ``shares`` test processes."""
    heavy: list[tuple[float, str, list[pytest.Item]]] = []
    fast: list[pytest.Item] = []
    for module, its in _modules(items).items():
        tiers = [_tier(i) for i in its]
        if all(t == "fast" for t in tiers):
            fast.extend(its)
        else:
            rank = 0 if "cluster" in tiers else 1
            heavy.append((rank, -sum(SECONDS[t] for t in tiers), module, its))
    heavy.sort()                     # cluster modules first, then by weight, heaviest first
    bins: list[list[pytest.Item]] = [[] for _ in range(shares)]
    weight = [0.0] * shares
    for _, minus_weight, _, its in heavy:
        at = weight.index(min(weight))
        bins[at].extend(its)
        weight[at] -= minus_weight
    # worksteal sends the first len//N tests to the first process, and so on: fill each share
    # to that size with fast tests (a share already past it hands its tail to the next one).
    ordered: list[pytest.Item] = []
    rest = [i for b in bins for i in b] + fast
    size = len(rest) // shares
    for at, b in enumerate(bins):
        want = size if at < shares - 1 else len(rest) - len(ordered)
        ordered.extend(b)
        take = max(0, want - len(b))
        ordered.extend(fast[:take])
        del fast[:take]
    ordered.extend(fast)
    return ordered


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    # xdist sets a worker's own --dist to "no": tell it the run's.
    node.workerinput[DIST_KEY] = node.config.getoption("dist", None)


DIST_KEY = "seatide_run_order_dist"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # After -m has deselected. In each xdist worker: every one computes the same order from
    # the same collection.
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or workerinput.get(DIST_KEY) != "worksteal":
        return
    items[:] = share_out(items, int(workerinput["workercount"]))
