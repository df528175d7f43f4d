"""Hive sink and source against a real thrift metastore (PySpark's Hive 2.3 jars, backed by PostgreSQL):
partitioned text, parquet and orc tables; each micro-batch published once across a crash after its
decision, its partitions registered once; chosen partitions read back; the tables checked from a
separate Hive-enabled Spark session through the metastore."""

from __future__ import annotations

import os

import pytest

from seatide import failpoints
from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.connectors.hive import metastore as hms
from tests.connectors.hive_server import hive_metastore, spark_sql
from tests.e2e.harness import InProcessCluster

pytestmark = pytest.mark.spark
__all__ = ["hive_metastore"]

FORMATS = {
    "parquet": ("org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
                "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
                "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"),
    "orc": ("org.apache.hadoop.hive.ql.io.orc.OrcInputFormat", "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
            "org.apache.hadoop.hive.ql.io.orc.OrcSerde"),
    "text": ("org.apache.hadoop.mapred.TextInputFormat",
             "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
             "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"),
}


def create_table(metastore, name: str, columns, partition_keys, fmt: str) -> None:
    """A managed table as Hive's CREATE TABLE ... STORED AS <fmt> makes it."""
    from hive_metastore.ttypes import Database, FieldSchema, SerDeInfo, StorageDescriptor, Table

    database, table = name.split(".")
    with hms.connect([metastore.uri]) as client:
        if database not in client.get_all_databases():
            client.create_database(Database(name=database, locationUri=f"file://{metastore.warehouse}/{database}.db",
                                            parameters={}))
        inp, out, serde = FORMATS[fmt]
        params = {"field.delim": ",", "serialization.format": ","} if fmt == "text" else {}
        sd = StorageDescriptor(cols=[FieldSchema(n, t, None) for n, t in columns],
                               location=f"file://{metastore.warehouse}/{database}.db/{table}", inputFormat=inp,
                               outputFormat=out, compressed=False, numBuckets=-1,
                               serdeInfo=SerDeInfo(serializationLib=serde, parameters=params), bucketCols=[],
                               sortCols=[], parameters={})
        client.create_table(Table(tableName=table, dbName=database, owner="test", sd=sd, parameters={},
                                  partitionKeys=[FieldSchema(n, t, None) for n, t in partition_keys],
                                  tableType="MANAGED_TABLE"))


def partition_values(metastore, name: str) -> list[list[str]]:
    with hms.connect([metastore.uri]) as client:
        table = hms.get_table(client, name)
        return sorted(values for values, _ in hms.partitions(client, table))


def files_under(path: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), path) for d, dirs, fs in os.walk(path)
                  for f in fs if not d[len(path):].startswith("/.") and not f.startswith((".", "_")))


FAKE = """
source {{ FakeSource {{ plugin_output = "fake", row.num = {rows}, split.num = 3, sequence.field = "id",
                       schema = {{ fields {{ id = bigint, name = string, price = "decimal(10,2)" }} }} }} }}
transform {{ Sql {{ plugin_input = "fake", plugin_output = "rows",
  query = "select id, name, price, concat('r', cast(id % 3 as string)) as region, cast(id % 2 as int) as bucket from fake" }} }}
"""


def test_fake_to_partitioned_hive_tables_once_across_a_crash_then_read_back(spark, tmp_path, monkeypatch,
                                                                            hive_metastore):
    """FakeSource -> a parquet table partitioned by region and bucket, in micro-batches; the first
    attempt dies right after its first decision (before any file moved), the next one rolls it forward.
    Every row once, every partition registered once; the Hive source reads all or chosen partitions;
    a separate Spark session sees the same through the metastore. Text and orc tables alike (plain).
    Two micro-batches of 100 rows: the one decided before the crash and one after the roll-forward
    (a third added a batch's time, nothing the story checks); region r1 holds ids 1, 4, .., 199."""
    local = InProcessCluster(spark, str(tmp_path / "data"))
    columns = [("id", "bigint"), ("name", "string"), ("price", "decimal(10,2)")]
    create_table(hive_metastore, "shop.sales", columns, [("region", "string"), ("bucket", "int")], "parquet")
    create_table(hive_metastore, "shop.sales_text", columns, [("region", "string")], "text")
    create_table(hive_metastore, "shop.sales_orc", columns, [], "orc")
    marker = str(tmp_path / "crashed")
    monkeypatch.setitem(failpoints._POINTS, "sink.after_decision", f"once:raise:{marker}")
    uri = hive_metastore.uri
    run = local.run(f"""
env {{ job.mode = BATCH, checkpoint.interval = 1000, micro-batch.max-rows = 100, job.retry.interval.seconds = 0 }}
{FAKE.format(rows=200)}
sink {{ Hive {{ plugin_input = "rows", table_name = "shop.sales", metastore_uri = "{uri}", compress_codec = snappy }} }}
""")
    assert run.status == "FINISHED", run.error
    assert os.path.exists(marker) and len(run.attempts()) == 2
    monkeypatch.delitem(failpoints._POINTS, "sink.after_decision")
    location = f"{hive_metastore.warehouse}/shop.db/sales"
    assert partition_values(hive_metastore, "shop.sales") == [[f"r{r}", str(b)] for r in range(3) for b in (0, 1)]
    assert all(f.startswith("region=r") and "/bucket=" in f for f in files_under(location))

    run = local.run(f"""
env {{ job.mode = BATCH }}
{FAKE.format(rows=30)}
sink {{
  Hive {{ plugin_input = "rows", table_name = "shop.sales_text", metastore_uri = "{uri}" }}
  Hive {{ plugin_input = "rows", table_name = "shop.sales_orc", metastore_uri = "{uri}", compress_codec = zlib }}
}}
""")
    assert run.status == "FINISHED", run.error

    # both reads in one job (a pipeline each): one job's start fewer, the same checks
    out = str(tmp_path / "read")
    run = local.run(f"""
env {{ job.mode = BATCH }}
source {{
  Hive {{ plugin_output = "r1", table_name = "shop.sales", metastore_uri = "{uri}", read_partitions = ["region=r1"],
         read_columns = ["id", "region", "bucket"] }}
  Hive {{ plugin_output = "text", table_name = "shop.sales_text", metastore_uri = "{uri}" }}
}}
sink {{
  Assert {{ plugin_input = "r1", rules {{
    row_rules = [{{ rule_type = MIN_ROW, rule_value = 67 }}, {{ rule_type = MAX_ROW, rule_value = 67 }}]
    field_rules = [{{ field_name = region, field_type = string, field_value = [{{ equals_to = "r1" }}] }},
                   {{ field_name = bucket, field_type = int, field_value = [{{ rule_type = NOT_NULL }}] }}]
  }} }}
  LocalFile {{ plugin_input = "text", path = "{out}", file_format_type = json }}
}}
""")
    assert run.status == "FINISHED", run.error
    import json

    rows = sorted((json.loads(line) for f in files_under(out) for line in open(os.path.join(out, f))),
                  key=lambda r: r["id"])
    assert len(rows) == 30 and rows[4] == {"id": 4, "name": rows[4]["name"], "price": rows[4]["price"],
                                           "region": "r1"}

    counted = spark_sql(hive_metastore, [
        "SELECT count(*), count(DISTINCT id), min(id), max(id) FROM shop.sales",
        "SELECT region, bucket, count(*) FROM shop.sales GROUP BY region, bucket ORDER BY region, bucket",
        "SHOW PARTITIONS shop.sales",
        "SELECT count(*), sum(price) FROM shop.sales_text",
        "SELECT count(*), sum(id) FROM shop.sales_orc",
    ])
    assert counted[0] == [[200, 200, 0, 199]]
    assert [r[:2] for r in counted[1]] == [[f"r{r}", b] for r in range(3) for b in (0, 1)]
    assert sum(r[2] for r in counted[1]) == 200
    assert sorted(r[0] for r in counted[2]) == sorted(f"region=r{r}/bucket={b}" for r in range(3) for b in (0, 1))
    assert counted[3][0][0] == 30 and counted[4] == [[30, sum(range(30))]]


def test_hive_options_are_checked_before_the_job_runs(tmp_path):
    site = tmp_path / "hive-site.xml"
    site.write_text("<configuration><property><name>hive.metastore.uris</name>"
                    "<value>thrift://127.0.0.1:9083</value></property></configuration>")

    def check(block: str, kind: str = "sink") -> str:
        body = f"{kind} {{ Hive {{ {block} }} }}"
        text = ("env { job.mode = BATCH }\n" + (body if kind == "source" else
                "source { FakeSource { row.num = 1, schema = { fields { id = bigint } } } }\n" + body))
        if kind == "source":
            text += "\nsink { Console {} }"
        try:
            load_job_text(text)
        except ConfigError as exc:
            return str(exc)
        return ""

    assert "must be database.table" in check('table_name = "sales", metastore_uri = "thrift://h:9083"')
    assert "metastore_uri" in check('table_name = "db.t"')
    assert "thrift://host:port" in check('table_name = "db.t", metastore_uri = "http://h:9083"')
    assert "Kerberos" in check('table_name = "db.t", metastore_uri = "thrift://h:9083", kerberos_principal = "x"')
    assert check(f'table_name = "db.t", hive_site_path = "{site}"') == ""     # the URI from hive-site.xml
    assert "same depth" in check('table_name = "db.t", metastore_uri = "thrift://h:9083", '
                                 'read_partitions = ["a=1", "a=1/b=2"]', "source")
