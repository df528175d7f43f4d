"""Changes to one key are applied in source order, even after a transform reorders the rows.

A sink that applies changes by key keeps the last change per key of a batch. Which change is
last must be the source's order, carried with each row (``__row_seq``), not the order the rows
reach the sink in: a Sql transform's ORDER BY or REPARTITION moves a key's changes around.
"""

from __future__ import annotations

import pytest

from tests.connectors.test_jdbc_sink import query, table_name
from tests.e2e.harness import InProcessCluster

pytestmark = pytest.mark.spark

URL, USER = "jdbc:postgresql://127.0.0.1:5432/test", "postgres"

# In source order: key 1 is inserted, updated and deleted; key 2 is inserted and updated;
# key 3 is deleted and inserted again. ``pos`` numbers the changes in that order.
CHANGES = """
    { kind = INSERT, fields = [1, "one", 1] }
    { kind = UPDATE_BEFORE, fields = [1, "one", 2] }
    { kind = UPDATE_AFTER, fields = [1, "uno", 3] }
    { kind = DELETE, fields = [1, "uno", 4] }
    { kind = INSERT, fields = [2, "two", 5] }
    { kind = UPDATE_BEFORE, fields = [2, "two", 6] }
    { kind = UPDATE_AFTER, fields = [2, "dos", 7] }
    { kind = DELETE, fields = [3, "three", 8] }
    { kind = INSERT, fields = [3, "tres", 9] }
"""
FINAL = [(2, "dos"), (3, "tres")]


def _job(table: str, query_text: str, env: str = "job.mode = BATCH") -> str:
    rows = ",".join(line for line in CHANGES.strip().splitlines())
    return f"""
env {{ {env} }}
source {{ FakeSource {{ plugin_output = "changes",
                       schema = {{ fields {{ id = bigint, name = string, pos = int }} }},
                       rows = [{rows}] }} }}
transform {{ Sql {{ plugin_input = "changes", plugin_output = "reordered", query = "{query_text}" }} }}
sink {{ Jdbc {{ plugin_input = "reordered", url = "{URL}", user = "{USER}", table = "{table}",
               primary_keys = ["id"] }} }}
"""


@pytest.mark.parametrize("query_text", [
    "select id, name from changes order by pos desc",          # the last change reaches the sink first
    "select * from changes order by pos desc",
], ids=["select-list", "star"])
def test_a_transform_that_reverses_the_rows_does_not_reverse_the_changes(spark, tmp_path, query_text):
    table = table_name()
    run = InProcessCluster(spark, str(tmp_path / "data")).run(_job(table, query_text))
    assert run.status == "FINISHED", run.error
    assert query((URL, USER), f"SELECT id, name FROM {table} ORDER BY id") == FINAL


# micro-batches: Fake's rows reach the transform as a stream, which Spark cannot number
CHECKPOINTED = "job.mode = BATCH, checkpoint.interval = 1000"
MOVE_BY_POS = "select /*+ REPARTITION(2, pos) */ id, name from changes"


def test_a_stream_of_changes_moved_between_partitions_applies_in_source_order(spark, tmp_path):
    """FakeSource's rows as micro-batches (a stream) through a transform that moves them between
    partitions: the source's own row numbers order each key's changes."""
    table = table_name()
    run = InProcessCluster(spark, str(tmp_path / "data")).run(_job(table, MOVE_BY_POS, CHECKPOINTED))
    assert run.status == "FINISHED", run.error
    assert query((URL, USER), f"SELECT id, name FROM {table} ORDER BY id") == FINAL


def test_a_stream_of_changes_without_their_order_is_refused_before_a_keyed_sink(spark, tmp_path, monkeypatch):
    """A source plugin that streams changes without numbering them (FakeSource made to forget):
    Spark cannot number a stream, so the job fails at start, naming the source, the sink and the
    way out, and the target table is never written."""
    from seatide.connectors.fake.source import FakeSource
    from seatide.plugin.rowkind import ROW_SEQ_COLUMN

    numbered = FakeSource.rows_from
    monkeypatch.setattr(FakeSource, "rows_from", lambda self, numbers: numbered(self, numbers).drop(ROW_SEQ_COLUMN))
    table = table_name()
    run = InProcessCluster(spark, str(tmp_path / "data")).run(_job(table, MOVE_BY_POS, CHECKPOINTED), max_attempts=1)
    assert run.status == "FAILED"
    for part in ("FakeSource", "Jdbc", "streams changes without the hidden '__row_seq'", "job.mode = BATCH"):
        assert part in run.error, run.error
    with pytest.raises(Exception, match="does not exist"):
        query((URL, USER), f"SELECT id, name FROM {table}")


def _names_by_partition(spark) -> dict[int, list[str]]:
    """Names by the partition REPARTITION(2, name) sends them to (Spark's hash of the value)."""
    found = {0: [], 1: []}
    for candidate in (f"n{i}" for i in range(64)):
        found[spark.sql(f"SELECT pmod(hash('{candidate}'), 2)").first()[0]].append(candidate)
    return found


def _names_in_partitions(spark) -> tuple[str, str, str]:
    """Names that REPARTITION(2, name) sends to partitions 1, 0 and 1, so that a key's later
    change lands in the partition read first."""
    found = _names_by_partition(spark)
    return found[1][0], found[0][0], found[1][1]


def _moving_transform(job: str) -> str:
    """``job`` with a Sql transform between its source "src" and its sink's input "moved" that
    moves rows between partitions by name."""
    return job.replace("\nsink {", '\ntransform { Sql { plugin_input = "src", plugin_output = "moved", '
                       'query = "select /*+ REPARTITION(2, name) */ id, name from src" } }\nsink {', 1)


def test_cdc_changes_moved_between_partitions_by_a_transform_apply_in_commit_order(spark, private_postgres, tmp_path):
    """Postgres-CDC -> Sql with a REPARTITION hint -> Jdbc upsert. One transaction inserts key 1
    and updates it, inserts key 2 and deletes it; the hint puts the update and the delete (a
    DELETE without the old row under the default replica identity: its name is NULL, partition 0)
    in the partition read first, before the inserts they follow."""
    from tests.connectors.test_cdc_types import Follower, run_and_follow, streaming_job
    from tests.every_type import unique

    later_first, earlier, other = _names_in_partitions(spark)
    assert spark.sql("SELECT pmod(hash(CAST(NULL AS STRING)), 2)").first()[0] == 0
    database = unique("change_order")
    with private_postgres.connect() as admin:
        admin.execute(f"CREATE DATABASE {database}")
    try:
        with private_postgres.connect(database) as conn:
            conn.execute("CREATE TABLE src (id INT PRIMARY KEY, name TEXT)")
            conn.execute("INSERT INTO src VALUES (0, 'zero')")

        def differences():
            with private_postgres.connect(database) as conn:
                source = conn.execute("SELECT id, name FROM src ORDER BY id").fetchall()
                copy = conn.execute("SELECT id, name FROM dst ORDER BY id").fetchall()
            return {} if source == copy else {"source": source, "copy": copy}

        def change():
            with private_postgres.connect(database) as conn, conn.transaction():   # one batch
                conn.execute(f"INSERT INTO src VALUES (1, '{earlier}')")
                conn.execute(f"UPDATE src SET name = '{later_first}' WHERE id = 1")
                conn.execute(f"INSERT INTO src VALUES (2, '{other}')")
                conn.execute("DELETE FROM src WHERE id = 2")

        url = f"jdbc:postgresql://127.0.0.1:{private_postgres.port}/{database}"
        source = (f'Postgres-CDC {{ base-url = "{url}", username = "postgres", password = "", '
                  f'table-names = ["{database}.public.src"], plugin_output = "src" }}')
        sink = (f'Jdbc {{ plugin_input = "moved", url = "{url}", user = "postgres", password = "", '
                f'table = "dst", primary_keys = ["id"] }}')
        run_and_follow(spark, tmp_path, _moving_transform(streaming_job(source, sink)), Follower(differences, change))
    finally:
        private_postgres.drop_database(database)


def test_mysql_cdc_changes_moved_between_partitions_by_a_transform_apply_in_commit_order(spark, private_mariadb,
                                                                                        tmp_path):
    """MySQL-CDC -> Sql with a REPARTITION hint -> Jdbc upsert. One transaction inserts key 1 and
    renames it, deletes key 3 and inserts it again; the hint puts each key's later change (the
    update's after image, the new key 3) in partition 0, read before the earlier ones (the insert
    and the update's before image, the delete) in partition 1. In arrival order key 1 would end
    deleted (by its before image) and key 3 missing."""
    from tests.connectors.test_cdc_types import Follower, run_and_follow, streaming_job
    from tests.every_type import unique

    names = _names_by_partition(spark)
    (later_1, later_3), (earlier_1, earlier_3) = names[0][:2], names[1][:2]
    database = unique("change_order")
    private_mariadb.execute(f"CREATE DATABASE {database}")
    try:
        with private_mariadb.connect(database) as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE src (id INT PRIMARY KEY, name VARCHAR(16))")
            cur.execute(f"INSERT INTO src VALUES (0, 'zero'), (3, '{earlier_3}')")

        def differences():
            with private_mariadb.connect(database) as conn, conn.cursor() as cur:
                cur.execute("SELECT id, name FROM src ORDER BY id")
                source = cur.fetchall()
                cur.execute("SELECT id, name FROM dst ORDER BY id")
                copy = cur.fetchall()
            return {} if source == copy else {"source": source, "copy": copy}

        def change():
            with private_mariadb.connect(database, autocommit=False) as conn, conn.cursor() as cur:
                cur.execute(f"INSERT INTO src VALUES (1, '{earlier_1}')")
                cur.execute(f"UPDATE src SET name = '{later_1}' WHERE id = 1")
                cur.execute("DELETE FROM src WHERE id = 3")
                cur.execute(f"INSERT INTO src VALUES (3, '{later_3}')")
                conn.commit()                   # one transaction: one batch

        url = f"jdbc:mariadb://127.0.0.1:{private_mariadb.port}/{database}"
        source = (f'MySQL-CDC {{ base-url = "{url}", username = "root", password = "", '
                  f'table-names = ["{database}.src"], server-id = 5432, plugin_output = "src" }}')
        sink = (f'Jdbc {{ plugin_input = "moved", url = "{url}", user = "root", password = "", '
                f'table = "dst", primary_keys = ["id"] }}')
        run_and_follow(spark, tmp_path, _moving_transform(streaming_job(source, sink)), Follower(differences, change))
    finally:
        private_mariadb.execute(f"DROP DATABASE {database}")
