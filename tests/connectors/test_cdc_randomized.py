"""The randomized CDC check (seatide.testing.cdc_check) on both source databases and both sink
modes: seeded transactions with key changes, deletes, TRUNCATE, large values and edge numerics,
crashes injected at random points, and the target equal to the source at the end. CI runs a
short fixed-seed case; `bash scripts/test -m soak` a longer one, and
`python -m seatide.testing.cdc_check --seed N --transactions M` any other."""

from __future__ import annotations

import pytest

from tests.soak_seeds import soak_seeds

from seatide.testing.cdc_check import mysql_endpoint, postgres_endpoint, run_check

pytestmark = pytest.mark.spark
SHARED_POSTGRES = postgres_endpoint(5432, "test")
SHARED_MARIADB = mysql_endpoint(3306, "test")


def endpoints(kind: str, private_postgres, private_mariadb):
    if kind == "postgres":
        return postgres_endpoint(private_postgres.port, "postgres"), SHARED_MARIADB
    return mysql_endpoint(private_mariadb.port, "test"), SHARED_POSTGRES


@pytest.mark.parametrize("upsert", [True, False], ids=["upsert", "plain"])
@pytest.mark.parametrize("kind", ["postgres", "mysql"])
def test_target_equals_source_after_random_transactions_and_crashes(spark, private_postgres, private_mariadb,
                                                                   tmp_path, kind, upsert):
    source, target = endpoints(kind, private_postgres, private_mariadb)
    outcome = run_check(spark, source, target, upsert=upsert, seed=20261127, transactions=15,
                        workdir=str(tmp_path))
    assert outcome.transactions == 15


@pytest.mark.soak
@pytest.mark.parametrize("seed", soak_seeds(1, 2, 3))
@pytest.mark.parametrize("upsert", [True, False], ids=["upsert", "plain"])
@pytest.mark.parametrize("kind", ["postgres", "mysql"])
def test_target_equals_source_after_many_random_transactions(spark, private_postgres, private_mariadb, tmp_path,
                                                             kind, upsert, seed):
    source, target = endpoints(kind, private_postgres, private_mariadb)
    run_check(spark, source, target, upsert=upsert, seed=seed, transactions=300, workdir=str(tmp_path),
              deadline_s=600)
