"""TIME through pipelines that run as Structured Streaming queries (STREAMING, and BATCH with
``checkpoint.interval``), run as a driver process runs them: on a thread where the SparkSession
is not active (``InProcessCluster(driver_thread=True)``). There Spark used to plan the query
with its default settings, TIME off, and refuse it with UNSUPPORTED_TIME_TYPE at ``writeStream``.

A job in the shape of SeaTunnel's ``func_system``; time-of-day written by Fake into files and
a PostgreSQL table, and read back from both by the file and Jdbc sources in a STREAMING job.
(Postgres-CDC and MySQL-CDC carry their time columns in tests/connectors/test_cdc_types.py,
run the same way.)
"""

from __future__ import annotations

import datetime as dt
import secrets
import time

import pytest
from sqlalchemy import select

from seatide.store import schema as s
from seatide.store.jobs import request_stop
from tests.databases.jobs import PG_URL, pg_connect

pytestmark = pytest.mark.spark


@pytest.fixture
def pg_table():
    name = f"time_{secrets.token_hex(4)}"
    yield name
    with pg_connect() as pg:
        pg.execute(f"DROP TABLE IF EXISTS {name}")


# SeaTunnel's func_system: casts in a checkpointed BATCH job, the Assert of each, a NULL-typed
# field whose rule says `equals_to = null` (SeaTunnel reads a null as no value: nothing to compare)
FUNC_SYSTEM = """
env {
  parallelism = 1
  job.mode = "BATCH"
  checkpoint.interval = 10000
}
source {
  FakeSource {
    plugin_output = "fake"
    schema = { fields { id = "bigint", name = "string", c2 = "timestamp", c4 = "bigint", c5 = "int",
                        c6 = "int", c8 = "string" } }
    rows = [ { fields = [7, "Ann Lee", "2020-02-29T23:59:58", 1600000000123, 19991231, 102030, "x1"], kind = INSERT } ]
  }
}
transform {
  Sql {
    plugin_input = "fake"
    plugin_output = "fake1"
    query = "select cast(id as STRING) as id, cast(c2 as DATE) as c2_1, cast(c4 as timestamp) as c4_1, cast(c5 as date) as c5, cast(c6 as time) as c6, try_cast(c8 AS int) AS c9, name as `apply` from dual"
  }
}
sink {
  Assert {
    plugin_input = "fake1"
    rules = {
      field_rules = [
        { field_name = "id", field_type = "string", field_value = [ {equals_to = "7"} ] },
        { field_name = "c2_1", field_type = "date", field_value = [ {equals_to = "2020-02-29"} ] },
        { field_name = "c4_1", field_type = "timestamp", field_value = [ {equals_to = "2020-09-13T12:26:40.123"} ] },
        { field_name = "c5", field_type = "date", field_value = [ {equals_to = "1999-12-31"} ] },
        { field_name = "c6", field_type = "time", field_value = [ {equals_to = "10:20:30"} ] },
        { field_name = "c9", field_type = "null", field_value = [ {equals_to = null} ] },
        { field_name = "apply", field_type = "string", field_value = [ {equals_to = "Ann Lee"} ] }
      ]
    }
  }
}
"""


def test_seatunnel_func_system_job_casts_to_time_in_a_checkpointed_batch(driver):
    run = driver.run(FUNC_SYSTEM)
    assert run.status == "FINISHED", run.error


def time_rule(field: str, value: str) -> str:
    return f'{{ field_name = {field}, field_type = time, field_value = [{{ rule_type = NOT_NULL }}, {{ equals_to = "{value}" }}] }}'


def test_time_is_written_to_files_and_postgres_and_streamed_back_as_time(driver, tmp_path, pg_table):
    csv, parquet = tmp_path / "csv", tmp_path / "parquet"
    written = driver.run(f"""
env {{ job.mode = BATCH, checkpoint.interval = 1000, job.retry.times = 0 }}
source {{ FakeSource {{ plugin_output = "fake"
  schema = {{ fields {{ id = bigint, t = time, r = {{ z = time }}, m = "map<string, time>" }} }}
  rows = [{{ kind = INSERT, fields = [1, "12:34:56.25", ["01:02:03"], {{ k = "23:59:59.999999" }}] }},
          {{ kind = INSERT, fields = [2, "00:00:00", ["00:00:01"], {{ k = "00:00:00" }}] }}] }} }}
transform {{ Sql {{ plugin_input = "fake", plugin_output = "flat", query = "select id, t from fake" }} }}
sink {{
  Assert {{ plugin_input = "fake", rules {{ row_rules = [{{ rule_type = MIN_ROW, rule_value = 2 }}]
    field_rules = [{{ field_name = r, field_type = "{{z = time}}", field_value = [{{ rule_type = NOT_NULL }}] }},
                   {{ field_name = m, field_type = "map<string, time>", field_value = [{{ rule_type = NOT_NULL }}] }}] }} }}
  LocalFile {{ plugin_input = "flat", path = "{csv}", file_format_type = csv }}
  LocalFile {{ plugin_input = "fake", path = "{parquet}", file_format_type = parquet }}
  Jdbc {{ plugin_input = "flat", url = "{PG_URL}", user = "postgres", password = "", table = "{pg_table}",
          primary_keys = [id], schema_save_mode = CREATE_SCHEMA_WHEN_NOT_EXIST }}
}}
""")
    assert written.status == "FINISHED", written.error
    with pg_connect() as pg:
        assert pg.execute(f"SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
                          f"'{pg_table}'::regclass AND attname = 't'").fetchone()[0].startswith("time")
        assert pg.execute(f"SELECT id, t FROM {pg_table} ORDER BY id").fetchall() == \
            [(1, dt.time(12, 34, 56, 250000)), (2, dt.time(0, 0))]

    # read back by a STREAMING job: each source its own query; Assert fails the job on a wrong
    # value or type, so a job that reached every row and is then canceled has checked them all
    checks = [time_rule("t", "12:34:56.25")]
    streamed = f"""
env {{ job.mode = STREAMING, checkpoint.interval = 500, job.retry.times = 0 }}
source {{
  Jdbc {{ plugin_output = "pg", url = "{PG_URL}", user = "postgres", password = "", query = "select * from {pg_table} where id = 1" }}
  LocalFile {{ plugin_output = "csv", path = "{csv}", file_format_type = csv, schema = {{ fields {{ id = bigint, t = time }} }} }}
  LocalFile {{ plugin_output = "parquet", path = "{parquet}", file_format_type = parquet }}
}}
transform {{ Sql {{ plugin_input = "parquet", plugin_output = "one", query = "select id, t, r.z as z from parquet where id = 1" }}
             Sql {{ plugin_input = "csv", plugin_output = "csv_one", query = "select * from csv where id = 1" }} }}
sink {{
  Assert {{ plugin_input = "pg", rules {{ field_rules = [{", ".join(checks)}] }} }}
  Assert {{ plugin_input = "csv_one", rules {{ field_rules = [{", ".join(checks)}] }} }}
  Assert {{ plugin_input = "one", rules {{ field_rules = [{", ".join([*checks, time_rule("z", "01:02:03")])}] }} }}
}}
"""
    run = driver.run(streamed, stop_after=stop_when_rows_written(3))
    assert run.status == "CANCELED", run.error
    assert sum(p.rows_written or 0 for p in run.pipelines()) == 3


def stop_when_rows_written(rows: int, deadline_s: float = 120.0):
    """A ``stop_after`` that cancels the job once its pipelines have written ``rows`` rows."""
    def stop(store, job_id: str) -> None:
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            with store.read() as conn:
                written = conn.execute(select(s.pipelines.c.rows_written).where(s.pipelines.c.job_id == job_id)).all()
            if sum(r or 0 for (r,) in written) >= rows:
                break
            time.sleep(0.2)
        request_stop(store, job_id, savepoint=False, actor="test")
    return stop
