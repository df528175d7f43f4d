"""Which store a cluster test runs on.

The ``store_url`` fixture runs a test on SQLite and on PostgreSQL. A cluster test runs on both
only where the store's own mechanism is its subject: the leader's lease and lock, the
liveness locks, a copy outside a store transaction, a crash at every failpoint and a leader
that dies around a terminal status (these two: PostgreSQL in CI, SQLite in the soak set,
below). The others (resume, savepoints, worker loss, hung drivers) decide the same way on
either store, so each runs on one, and they are split between the two so that both stores
carry whole jobs end to end. The stores' own code runs on both in
tests/store, tests/coordinator and tests/runtime/test_sink_decision.py.

CI's time (docs/testing.md: under 20 minutes on two cores) buys one store for most stories that run on
both: ``postgresql_in_ci`` keeps the PostgreSQL run in CI and its SQLite twin in the soak set
(``bash scripts/test -m soak``), where the SQLite paths of the same mechanism are seen in CI
through other tests (each says which).
"""

from __future__ import annotations

import pytest

sqlite_only = pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
postgresql_only = pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
postgresql_in_ci = pytest.mark.parametrize(
    "store_url", ["postgresql", pytest.param("sqlite", marks=pytest.mark.soak)], indirect=True)
