"""Jdbc source read types: every PostgreSQL and MySQL/MariaDB type of SeaTunnel's tables (and the
ones SeaTide adds: geometric, network, PostGIS, xml, money, interval, bit strings, tsvector, enums,
domains, ranges, more arrays) arrives as SeaTunnel's type with the same value, through Spark's JDBC
reader and the split reader alike; a type with no SeaTunnel type is refused by its name."""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal

import pymysql
import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.connectors.jdbc.read_types import UnsupportedColumnType, mysql_column
from seatide.connectors.jdbc.url import JdbcUrl
from seatide.plugin.base import ReadContext
from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.plugin.types import type_name
from tests.every_type import MY_COLUMNS, PG_COLUMNS, create_table, pg_extras, unique

PG_URL = "jdbc:postgresql://127.0.0.1:5432/test?user=postgres"
MY_URL = "jdbc:mariadb://127.0.0.1:3306/test?user=root"

# columns a table fills itself: row 2 (all nulls otherwise) holds their defaults
DEFAULTED = ("id", "ss", "se", "bs", ROW_KIND_COLUMN)


@pytest.fixture(params=["postgresql", "mariadb"])
def typed_table(request):
    url, columns = (PG_URL, PG_COLUMNS) if request.param == "postgresql" else (MY_URL, MY_COLUMNS)
    name = unique("jdbc_source_types")
    with JdbcUrl.parse(url).connect(autocommit=True) as conn:
        if request.param == "postgresql":
            pg_extras(conn)
        create_table(conn.cursor(), name, columns)
    yield url, name, columns
    with JdbcUrl.parse(url).connect(autocommit=True) as conn:
        conn.cursor().execute(f"DROP TABLE {name}")


def server_values(url: str, name: str, columns: dict) -> dict:
    """Values a column spec leaves to the server (None): MySQL's own geometry bytes."""
    if not url.startswith("jdbc:mariadb"):
        return {}
    wanted = [c for c, spec in columns.items() if spec[3] is None]
    with pymysql.connect(host="127.0.0.1", user="root", database="test") as conn, conn.cursor() as cur:
        cur.execute(f"SELECT {', '.join(wanted)} FROM {name} WHERE id = 1")
        return dict(zip(wanted, cur.fetchone()))


def test_every_listed_type_reads_as_seatunnels_type_and_value_both_ways(spark, typed_table, tmp_path):
    url, name, columns = typed_table
    job = load_job_text(f'source {{ Jdbc {{ url = "{url}", table_path = "{name}" }} }}\nsink {{ Console {{}} }}')
    source = job.sources[0].plugin
    expected_types = {"id": "int", **{c: spec[2] for c, spec in columns.items()}}
    assert {f.name: type_name(f.dataType) for f in source.schema().fields} == expected_types
    from_server = server_values(url, name, columns)

    parallel = source.read(ReadContext(spark, micro_batch=False, unbounded=False, parallelism=2,
                                       max_rows_per_batch=100, read_interval_ms=1000, plugin_id="s"))
    rows: list = []
    streamed = source.read(ReadContext(spark, micro_batch=True, unbounded=False, parallelism=2,
                                       max_rows_per_batch=100, read_interval_ms=1000, plugin_id="s"))
    query = (streamed.writeStream.trigger(availableNow=True).option("checkpointLocation", str(tmp_path / "ck"))
             .foreachBatch(lambda batch, _: rows.extend(batch.collect())).start())
    query.awaitTermination()
    for label, df in (("spark", parallel.collect()), ("split reader", rows)):
        by_id = {r.id: r.asDict() for r in df}
        assert sorted(by_id) == [1, 2], label
        assert all(v is None for k, v in by_id[2].items() if k not in DEFAULTED), (label, by_id[2])
        actual = by_id[1]
        wrong = {}
        for column, spec in columns.items():
            value, expected = actual[column], spec[3] if spec[3] is not None else from_server[column]
            if isinstance(expected, bytes):
                value = bytes(value) if isinstance(value, bytearray) else value
            same = value == expected if isinstance(expected, Decimal) or isinstance(expected, list) \
                else value == expected and type(value) is type(expected)
            if not same:
                wrong[column] = (value, expected)
        assert not wrong, (label, wrong)
    assert [f.dataType for f in parallel.schema.fields] == [f.dataType for f in streamed.schema.fields]


def jdbc_query_job(url: str, query: str) -> str:
    return f'source {{ Jdbc {{ url = "{url}", query = "{query}" }} }}\nsink {{ Console {{}} }}'


@pytest.mark.parametrize("query, named", [
    ("select 1 as id, row(1, 'a') as pair", "record"),
    ("select 1 as id, array[row(1, 'a')] as pairs", "record[]"),
])
def test_a_postgresql_type_without_a_seatunnel_type_is_refused_by_its_name(query, named):
    with pytest.raises(ConfigError) as error:
        load_job_text(jdbc_query_job(PG_URL, query))
    message = str(error.value)
    assert f"PostgreSQL type {named}" in message and "cast it in `query`" in message, message
    assert "type 2249" not in message and "type 2287" not in message, message


def test_seatide_check_names_the_type_and_the_way_out(tmp_path):
    path = tmp_path / "job.conf"
    path.write_text(jdbc_query_job(PG_URL, "select 1 as id, row(1, 2) as pair"))
    result = subprocess.run([sys.executable, "-m", "seatide.cli.main", "check", str(path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert "column 'pair' has PostgreSQL type record" in output and "CAST(pair AS text)" in output, output
    assert "Traceback" not in output


def test_a_mysql_type_code_without_a_seatunnel_type_is_refused_by_its_name():
    # Servers never describe a result column as MYSQL_TYPE_TIME2 (19, a storage format): the one
    # code that reaches the refusal, since every type a server sends has a SeaTunnel type.
    with pytest.raises(UnsupportedColumnType) as error:
        mysql_column("t2", 19, 10, 0, 0, 63)
    assert "MySQL type TIME2" in str(error.value) and "code" not in str(error.value)
    assert "cast it in `query`" in str(error.value)
