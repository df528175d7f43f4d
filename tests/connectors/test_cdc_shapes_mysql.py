"""The MySQL shapes of the randomized CDC check (seatide.testing.cdc_shapes_mysql): several captured
tables, sessions logging MINIMAL row images or statements (binlog_format = STATEMENT), keys moved
between shards in one transaction, shards merged into one target or each into its own, tables
truncated or dropped, columns added with defaults, a shard added on resume; crashes injected;
every target equal to its source at the end, or the job failed naming why and the check took the
way out. CI runs a short fixed seed and the added columns and shard scripted; `-m soak` longer
ones, and `python -m seatide.testing.cdc_shapes_mysql --seed N --transactions M [--merged]` any other."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.connectors.test_mysql_cdc import cdc_database  # noqa: F401  (a fixture)
from tests.soak_seeds import soak_seeds

from seatide.testing.cdc_check import mysql_endpoint, postgres_endpoint
from seatide.testing.cdc_shapes_mysql import ADD_SHARD, Column, run_mysql_shapes

pytestmark = pytest.mark.spark
SHARED_POSTGRES = postgres_endpoint(5432, "test")


def test_merged_targets_equal_their_sources_after_random_sessions_and_crashes(spark, private_mariadb, tmp_path):
    """A short fixed seed whose workload holds MINIMAL images, keys moved between shards and a
    session logging statements, which must fail the job loudly (then the way out is taken)."""
    outcome = run_mysql_shapes(spark, mysql_endpoint(private_mariadb.port, "test"), SHARED_POSTGRES,
                               seed=20261134, transactions=8, workdir=str(tmp_path), merged=True, statements=0.15,
                               crashes=("before_commit", None, "after_commit"))
    assert outcome.transactions == 8 and outcome.crashes >= 1
    assert "logged as text, without rows" in outcome.way_outs, outcome


@pytest.mark.soak
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("seed", soak_seeds(1, 2, 3, 4))
@pytest.mark.parametrize("merged", [False, True], ids=["a-target-each", "merged"])
def test_every_target_equals_its_source_after_many_random_sessions(spark, private_mariadb, tmp_path, merged, seed):
    run_mysql_shapes(spark, mysql_endpoint(private_mariadb.port, "test"), SHARED_POSTGRES, seed=seed,
                     transactions=300, workdir=str(tmp_path), merged=merged, ddl=0.03, added_tables=0.05,
                     deadline_s=600)


MOVES = [
    ["INSERT INTO shard_1 VALUES (1007, 'seven', 'n', 1)", "INSERT INTO shard_0 VALUES (1008, 'eight', 'n', 1)"],
    ["BEGIN", "DELETE FROM shard_1 WHERE id = 1007", "INSERT INTO shard_0 VALUES (1007, 'to shard 0', 'n', 2)",
     "DELETE FROM shard_0 WHERE id = 1008", "INSERT INTO shard_1 VALUES (1008, 'to shard 1', 'n', 2)", "COMMIT"],
]


@pytest.mark.parametrize("collected", [True, False], ids=["driver", "spark"])
def test_a_key_moved_between_merged_shards_in_one_transaction_survives(spark, private_mariadb, tmp_path,
                                                                       monkeypatch, collected):
    """Finding 3, end to end: MySQL-CDC -> the runtime's routing -> the Jdbc sink, shards merged into
    one target. In one transaction shard_1's DELETE of id 1007 then shard_0's INSERT of it (and
    1008 the other way): both rows must exist after, on the driver-collected path and on Spark's."""
    from seatide.runtime import table_routing

    if not collected:
        monkeypatch.setattr(table_routing, "LOCAL_BATCH_ROWS", 0)
    run_mysql_shapes(spark, mysql_endpoint(private_mariadb.port, "test"), SHARED_POSTGRES, seed=0, transactions=0,
                     workdir=str(tmp_path), merged=True, shards=2, script=MOVES, crashes=())


EVOLVED = [
    Column("c1", "int", (), True, 7),               # NOT NULL DEFAULT: the servers fill the rows they have
    ["INSERT INTO shard_1 (id, name, note, amount, c1) VALUES (2001, 'set', 'n', 1, 5)",
     "INSERT INTO shard_0 (id, name, note, amount) VALUES (2002, 'left to its default', 'n', 1)"],
    Column("c2", "varchar", (8,), False, None),     # NULL-able without a default
    ["BEGIN", "UPDATE shard_0 SET c2 = 'x' WHERE id = 2002", "UPDATE shard_1 SET c1 = 9 WHERE id = 2001", "COMMIT"],
    [ADD_SHARD],                                    # shard_2, its rows, and a resume capturing it
    Column("c3", "decimal", (10, 2), False, Decimal("1.50")),
    ["INSERT INTO shard_2 (id, name, note, amount, c3) VALUES (2003, 'new shard', NULL, 2, NULL)",
     "UPDATE shard_2 SET c1 = 11 WHERE id = 2003"],
]


def test_columns_added_with_defaults_and_a_shard_added_on_resume_reach_the_merged_target(spark, private_mariadb,
                                                                                       tmp_path):
    """The shapes the seeded run draws with ``ddl`` and ``added_tables``, scripted: columns added
    to every merged shard (NOT NULL DEFAULT, NULL-able without one, a DECIMAL default), inserts
    naming some and leaving others to their default, updates of them, and a shard created and
    captured by a resume with a changed table list (its snapshot and changes exactly once) while
    the old shards go on from their offsets; crashes before and after the sink's commit."""
    outcome = run_mysql_shapes(spark, mysql_endpoint(private_mariadb.port, "test"), SHARED_POSTGRES, seed=3,
                               transactions=0, workdir=str(tmp_path), merged=True, shards=2, script=EVOLVED,
                               crashes=("before_commit", None, "after_commit", "before_write"))
    assert outcome.tables_added == 1 and outcome.schema_changes >= 3, outcome


def test_an_alter_between_the_description_of_the_tables_and_the_snapshot_position_is_read(private_mariadb,
                                                                                          cdc_database):
    """Seed 4 (``--merged --ddl 0.06 --added-tables 0.1``), reduced: a query describes its tables
    when it starts and took its snapshot's binlog position at its first batch; an ALTER TABLE in
    between was in neither, so the rows after it met a layout no statement explained and the job
    failed for good ("altered before the job's start position"). Reading from no later than the
    description, the stream meets the statement and stops at it, as at any ALTER while it runs."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from seatide.connectors.mysql_cdc.stream import MySqlCdcReader, stream_options
    from seatide.plugin.evolution import schema_change_in
    from tests.connectors.test_mysql_cdc import read_range, source

    table = f"{cdc_database}.items"
    private_mariadb.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(20))",
                            f"INSERT INTO {table} VALUES (1, 'a')")
    plugin = source(private_mariadb, [table], "schema-changes.enabled = true")
    found, schema = plugin.discover(plugin.server_config())         # the query starts
    options = stream_options(plugin.server_config(), found, schema.json(), "initial", None, 1000, None, "evolve")
    private_mariadb.execute(f"ALTER TABLE {table} ADD COLUMN c1 INT NOT NULL DEFAULT 7")
    reader, stopped = MySqlCdcReader(options), None
    start = reader.initialOffset()
    for batch in range(4):          # the snapshot's batch (its position taken), then the binlog's
        try:
            end = reader.latestOffset(start, ReadAllAvailable())
            read_range(reader, start, end)
            if batch == 0:
                private_mariadb.execute(f"INSERT INTO {table} (id, name, c1) VALUES (2, 'b', 5)")
        except Exception as exc:  # noqa: BLE001 - where the stream stops, and why, is the finding
            stopped = schema_change_in(str(exc)) or str(exc)
            break
        start = end
    assert isinstance(stopped, dict) and "ddl" in stopped["seen"], stopped


@pytest.mark.soak
@pytest.mark.timeout(1200)
def test_seed_4_merged_with_added_columns_and_shards(spark, private_mariadb, tmp_path):
    """Once a strict xfail: an INSERT of id 29 into shard_1 by a MINIMAL-image session left c1 (NOT NULL)
    out, a later transaction moved the key (UPDATE shard_1 SET id = 55 WHERE id = 29), and the row, gone
    by its read, was written with null (NotNullViolation). Reduced: test_mysql_cdc_row_images.py."""
    run_mysql_shapes(spark, mysql_endpoint(private_mariadb.port, "test"), SHARED_POSTGRES, seed=4,
                     transactions=120, workdir=str(tmp_path), merged=True, ddl=0.06, added_tables=0.1,
                     deadline_s=300)


def test_a_job_failing_on_a_statement_that_changes_no_compared_value_fails_the_check(spark, private_mariadb,
                                                                                   tmp_path):
    """M3: the check stopped at the first moment the targets equalled the sources. A statement
    that fails the job for good but changes no compared value (an ALTER whose effect on the
    columns SeaTide cannot tell) left them equal, and the check passed with the job dead. It
    must wait for the stream to reach the binlog's end, running."""
    with pytest.raises(AssertionError, match="(?s)the CDC stream failed: .*cannot tell"):
        run_mysql_shapes(spark, mysql_endpoint(private_mariadb.port, "test"), SHARED_POSTGRES, seed=0,
                         transactions=0, workdir=str(tmp_path), merged=True, shards=2, crashes=(),
                         script=[["ALTER TABLE shard_0 CONVERT TO CHARACTER SET utf8mb4"]], deadline_s=120)


def test_the_check_takes_the_way_out_only_for_seatides_own_refusals():
    """M3: any failure text holding "was truncated" or "was dropped" was taken for a refusal the
    check may recover from (a quoted statement, a table's name, another error's words). Only
    SeaTide's own refusals of a statement without rows match, whole."""
    from seatide.connectors.mysql_cdc.binlog import refuse_rowless
    from seatide.connectors.mysql_cdc.catalog import CapturedTable
    from seatide.connectors.mysql_cdc.position import BinlogPosition
    from seatide.testing.cdc_shapes_mysql import GONE
    from seatide.testing.cdc_shapes_pg_check import _way_out

    captured = {("shop", "items"): CapturedTable("shop", "items", (("id", "int", "int", 10, 0),), ("id",))}
    refusals = {}
    for statement in ("TRUNCATE TABLE items", "DROP TABLE items", "UPDATE items SET id = id + 1"):
        with pytest.raises(Exception) as refused:
            refuse_rowless("shop", statement, BinlogPosition.of("binlog.000001", 400), captured)
        refusals[statement] = next(filter(None, (_way_out(g, str(refused.value)) for g in GONE)), None)
    assert refusals == {"TRUNCATE TABLE items": "was truncated", "DROP TABLE items": "was dropped",
                        "UPDATE items SET id = id + 1": "logged as text, without rows"}
    others = ["[seatide:permanent] MySQL-CDC: cannot follow the change of shop.items at binlog binlog.000001:9: "
              "the statement: ALTER TABLE items COMMENT 'row was truncated'",
              "Py4JJavaError: the partition was dropped while the job ran"]
    assert [_way_out(g, text) for text in others for g in GONE] == [None] * 6


def test_a_refusal_counts_as_a_way_out_only_for_a_change_the_workload_made():
    """Review of 887971c, 6: any refusal matching GONE was a way out, whether or not the workload
    had made such a change after the snapshot's position: a refusal of a statement the snapshot
    holds (a bug) passed the check. The workload records what it made; a refusal of another fails."""
    from seatide.connectors.mysql_cdc.binlog import refuse_rowless
    from seatide.connectors.mysql_cdc.catalog import CapturedTable
    from seatide.connectors.mysql_cdc.position import BinlogPosition
    from seatide.testing.cdc_shapes_mysql import GONE
    from seatide.testing.cdc_shapes_mysql_window import Rowless

    captured = {("shop", "shard_1"): CapturedTable("shop", "shard_1", (("id", "int", "int", 10, 0),), ("id",))}
    with pytest.raises(Exception) as refused:
        refuse_rowless("shop", "TRUNCATE shard_1", BinlogPosition.of("binlog.000001", 400), captured)
    record = Rowless()
    record.made_change("shard_1", "was dropped")
    record.made_change("shard_0", "was truncated")
    with pytest.raises(AssertionError, match="refused shard_1 \\(was truncated\\), but the workload made no such"):
        record.check(str(refused.value), GONE, 7)
    record.made_change("shard_1", "was truncated")
    record.check(str(refused.value), GONE, 7)
    assert record.made == set()             # taken: a fresh snapshot holds every change before it
    record.check("some other failure", GONE, 7)     # not a refusal: restart_or_take_the_way_out's to judge


def test_changes_between_the_description_and_the_first_batch_reach_the_targets(spark, private_mariadb, tmp_path):
    """Review of 887971c, 6: the workload never changed a table between the description and the
    first batch, nor created one again in another character set. With ``window`` every fresh start
    holds the description after the last shard's (failpoint mysql_cdc.table_described) while the
    first is truncated, changed by a statement logged as text, created again (same columns: passed
    over) or created again in another charset (refused, the way out taken)."""
    outcome = run_mysql_shapes(spark, mysql_endpoint(private_mariadb.port, "test"), SHARED_POSTGRES, seed=5,
                               transactions=40, workdir=str(tmp_path), shards=2, window=1.0, deadline_s=300)
    assert outcome.window_changes[0] == "another charset", outcome     # the seed draws it first
    # a charset's re-create in the window is refused (its bytes would be decoded in the other one)
    assert outcome.way_outs.count("was dropped") >= outcome.window_changes.count("another charset"), outcome
