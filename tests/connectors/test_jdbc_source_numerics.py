"""Jdbc source, checkpointed split-by-split read: numerics of an unconstrained PostgreSQL
``numeric`` (read as decimal(38, 18)) keep their digits; what does not fit fails the read
naming the column and the way out, never a bare InvalidOperation (finding 5 of issue 22)."""

from __future__ import annotations

import secrets
from decimal import Decimal

import pytest

from seatide.config.loader import load_job_text
from seatide.connectors.jdbc.url import JdbcUrl
from seatide.plugin.base import ReadContext

URL = "jdbc:postgresql://127.0.0.1:5432/test?user=postgres"


def execute(*statements: str) -> None:
    with JdbcUrl.parse(URL).connect(autocommit=True) as conn:
        cursor = conn.cursor()
        for statement in statements:
            cursor.execute(statement)


@pytest.fixture
def amounts():
    name = f"numerics_{secrets.token_hex(4)}"
    execute(f"CREATE TABLE {name} (id int PRIMARY KEY, n numeric)",
            f"INSERT INTO {name} VALUES (1, 12345678901.5), (2, -99999999999999999999.999999999999999999), "
            f"(3, 0.0000000000000000001)")
    yield name
    execute(f"DROP TABLE IF EXISTS {name}")


def read_all(spark, name: str, tmp_path) -> dict:
    job = load_job_text(f'source {{ Jdbc {{ url = "{URL}", table_path = "{name}", split.size = 2 }} }}\n'
                        "sink { Console {} }")
    ctx = ReadContext(spark, micro_batch=True, unbounded=False, parallelism=1, max_rows_per_batch=100,
                      read_interval_ms=1000, plugin_id="source[0]")
    rows: dict = {}
    query = (job.sources[0].plugin.read(ctx).writeStream.trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / f"ck{len(list(tmp_path.iterdir()))}"))
             .foreachBatch(lambda df, _: rows.update({r.id: r.n for r in df.collect()})).start())
    query.awaitTermination()
    return rows


@pytest.mark.spark
def test_unconstrained_numerics_keep_their_digits_and_overflow_is_refused(spark, amounts, tmp_path):
    assert read_all(spark, amounts, tmp_path) == {
        1: Decimal("12345678901.500000000000000000"),
        2: Decimal("-99999999999999999999.999999999999999999"),
        3: Decimal("0E-18")}
    execute(f"INSERT INTO {amounts} VALUES (4, 123456789012345678901)")
    with pytest.raises(Exception) as caught:
        read_all(spark, amounts, tmp_path)
    message = str(caught.value)
    assert "column n" in message and "123456789012345678901" in message and "decimal(38, 18)" in message
    assert "cast" in message and "InvalidOperation" not in message
