"""The PostgreSQL shapes of the randomized CDC check as `seatide run` jobs whose driver is SIGKILLed
(seatide.testing.cdc_shapes_pg_job): several tables of each replica identity, keys moved between
them, rows of megabytes, tables dropped and created again. Soak only: CI runs the same shapes in
one session (tests/connectors/test_cdc_shapes_pg.py) and the driver kills on one table
(tests/databases/test_cdc_jobs.py)."""

from __future__ import annotations

import pytest

from tests.soak_seeds import soak_seeds

from seatide.testing.cdc_check import postgres_endpoint
from seatide.testing.cdc_shapes_pg_job import run_shapes_job_check

pytestmark = pytest.mark.cluster


@pytest.mark.soak
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("seed", soak_seeds(5, 6))
def test_every_target_equals_its_source_through_driver_kills(tmp_path, private_postgres, seed):
    outcome = run_shapes_job_check(postgres_endpoint(private_postgres.port, "postgres"), postgres_endpoint(5432, "test"),
                                   seed=seed, transactions=150, kills=4, workdir=str(tmp_path), megabytes=0.05,
                                   deadline_s=600)
    assert outcome.crashes >= 1
