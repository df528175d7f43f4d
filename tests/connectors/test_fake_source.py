"""FakeSource: typed deterministic values, option checks, and exactly-once row numbering
in plain batch and micro-batch (Python split source + Spark expansion) reading."""

from __future__ import annotations

import datetime as dt
import string
import time
from decimal import Decimal

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.connectors.fake.layout import SplitLayout
from seatide.connectors.fake.split_stream import FakeSplitReader, stream_options
from seatide.plugin.base import PermanentError, ReadContext
from seatide.plugin.rowkind import ROW_KIND_COLUMN, RowKind


def fake(body: str, parallelism: int = 1):
    job = load_job_text(f"env {{ parallelism = {parallelism} }}\n"
                        f"source {{ FakeSource {{\n{body}\n}} }}\nsink {{ Console {{}} }}")
    return job.sources[0].plugin


def batch_ctx(spark, parallelism: int = 1) -> ReadContext:
    return ReadContext(spark, micro_batch=False, unbounded=False, parallelism=parallelism,
                       max_rows_per_batch=1_000_000, read_interval_ms=1000, plugin_id="source[0]")


def stream_ctx(spark, parallelism: int, max_rows: int) -> ReadContext:
    return ReadContext(spark, micro_batch=True, unbounded=False, parallelism=parallelism,
                       max_rows_per_batch=max_rows, read_interval_ms=1000, plugin_id="source[0]")


def run_available_now(df, checkpoint: str, batches: dict, fail_on_batch: int | None = None):
    """Run a micro-batch query to its end; ``batches[id]`` = its rows, sorted (a replay overwrites)."""
    def each_batch(batch_df, batch_id):
        batches[batch_id] = sorted(batch_df.collect())
        if batch_id == fail_on_batch:
            raise RuntimeError("injected failure before the batch commits")

    query = (df.writeStream.trigger(availableNow=True).option("checkpointLocation", checkpoint)
             .foreachBatch(each_batch).start())
    query.awaitTermination()


ALL_TYPES = """
row.num = 40
string.length = 7
bytes.length = 3
array.size = 2
map.size = 3
tinyint.min = -5
tinyint.max = 5
smallint.min = 100
smallint.max = 103
int.min = 20
int.max = 29
bigint.min = -7
bigint.max = 9000000000
float.min = 40.0
float.max = 43.0
double.min = -1.5
double.max = 2.5
schema = { fields {
  t = tinyint, s = smallint, i = int, b = bigint, f = float, d = double, m = "decimal(6, 2)",
  str = string, flag = boolean, raw = bytes, day = date, at = timestamp, nothing = "null",
  list = "array<int>", pairs = "map<string, double>", flags = "map<boolean, int>",
  inner { x = smallint, tags = "array<string>" }
} }
"""


def test_generated_values_honour_types_ranges_lengths_and_sizes(spark):
    source = fake(ALL_TYPES)
    df = source.read(batch_ctx(spark))
    assert df.columns[-1] == ROW_KIND_COLUMN
    assert df.columns[:-1] == source.schema().names
    rows = df.collect()
    assert len(rows) == 40
    for r in rows:
        assert -5 <= r.t < 5 and 100 <= r.s < 103 and 20 <= r.i < 29
        assert -7 <= r.b < 9_000_000_000
        assert 40.0 <= r.f <= 43.0 and -1.5 <= r.d <= 2.5
        assert Decimal("0") <= r.m < Decimal("10000") and r.m.as_tuple().exponent == -2
        assert len(r.str) == 7 and len(r.raw) == 3 and isinstance(r.flag, bool)
        assert r.day.year == 2024 and 1 <= r.day.day <= 28
        assert isinstance(r.at, dt.datetime) and r.nothing is None
        assert len(r.list) == 2 and all(0 <= v <= 2**31 - 1 for v in r.list)
        assert 1 <= len(r.pairs) <= 3 and all(-1.5 <= v <= 2.5 for v in r.pairs.values())
        assert 1 <= len(r.flags) <= 2          # repeated generated keys collapse, never fail
        assert 100 <= r.inner.x < 103 and [len(s) for s in r.inner.tags] == [7, 7]
        assert r[ROW_KIND_COLUMN] == RowKind.INSERT
    # Values vary from row to row (they are hashes, not constants).
    assert len({r.str for r in rows}) > 30 and len({r.i for r in rows}) > 5


def test_templates_pick_only_listed_values(spark):
    source = fake("""
        row.num = 60
        string.fake.mode = template
        string.template = ["kris", "hailin"]
        int.fake.mode = template
        int.template = [20, 21]
        double.template = [44.0, 45.5]
        date.year.template = [2020]
        date.month.template = [2]
        date.day.template = [31]
        time.hour.template = [7]
        time.minute.template = [30, 45]
        time.second.template = [0]
        schema = { fields { s = string, i = int, d = double, day = date, at = timestamp } }
    """)
    rows = source.read(batch_ctx(spark)).collect()
    assert {r.s for r in rows} == {"kris", "hailin"}
    assert {r.i for r in rows} == {20, 21}
    assert {r.d for r in rows} == {44.0, 45.5}
    # Day 31 does not exist in February: it is kept to the month's last day.
    assert {r.day for r in rows} == {dt.date(2020, 2, 29)}
    assert {(r.at.hour, r.at.minute, r.at.second) for r in rows} == {(7, 30, 0), (7, 45, 0)}


def test_long_strings_wide_decimals_and_extreme_ranges(spark):
    source = fake("""
        row.num = 30
        string.length = 40
        bigint.min = -9000000000000000000
        bigint.max = 9000000000000000000
        double.min = -1.7976931348623157e308
        schema = { fields { s = string, d = "decimal(38, 20)", b = bigint, x = double } }
    """)
    rows = source.read(batch_ctx(spark)).collect()
    assert all(len(r.s) == 40 and set(r.s) <= set(string.ascii_letters) for r in rows)
    assert all(len(r.d.as_tuple().digits) <= 38 and r.d.as_tuple().exponent == -20 for r in rows)
    assert all(-9e18 <= r.b <= 9e18 for r in rows) and min(r.b for r in rows) < 0 < max(r.b for r in rows)
    assert min(r.x for r in rows) < 0 < max(r.x for r in rows)


def test_two_reads_give_identical_rows(spark):
    source = fake(ALL_TYPES, parallelism=2)
    first = source.read(batch_ctx(spark, 2)).drop("nothing").collect()
    second = fake(ALL_TYPES, parallelism=2).read(batch_ctx(spark, 2)).drop("nothing").collect()
    assert len(first) == 80
    assert sorted(map(repr, first)) == sorted(map(repr, second))


def test_sequence_field_numbers_rows_once_across_readers_and_splits(spark):
    source = fake("""
        row.num = 25
        split.num = 4
        sequence.field = id
        schema = { fields { id = bigint, name = string } }
    """, parallelism=3)
    ids = [r.id for r in source.read(batch_ctx(spark, 3)).collect()]
    assert sorted(ids) == list(range(75))


def test_explicit_rows_are_emitted_by_every_reader_with_their_kinds(spark):
    source = fake("""
        schema = { fields { id = bigint, name = string, raw = bytes, tags = "map<string, int>",
                            price = "decimal(5, 2)", at = timestamp } }
        rows = [
          { kind = INSERT, fields = [1, "A", "bWlJWmo=", {"a": 1}, "12.50", "2023-04-22T23:20:58"] }
          { kind = UPDATE_BEFORE, fields = [1, "A", null, {}, 12.5, null] }
          { kind = UPDATE_AFTER, fields = [1, "it's", null, null, 3, null] }
          { kind = DELETE, fields = [1, "A", null, null, null, null] }
        ]
    """, parallelism=2)
    assert source.row_kinds() == frozenset(RowKind)
    rows = source.read(batch_ctx(spark, 2)).collect()
    assert len(rows) == 8
    by_kind = {}
    for r in rows:
        by_kind.setdefault(RowKind(r[ROW_KIND_COLUMN]), []).append(r)
    assert {k: len(v) for k, v in by_kind.items()} == {k: 2 for k in RowKind}
    first = by_kind[RowKind.INSERT][0]
    assert (first.id, first.name, first.raw, first.tags) == (1, "A", b"miIZj", {"a": 1})
    assert first.price == Decimal("12.50") and first.at == dt.datetime(2023, 4, 22, 23, 20, 58)
    assert by_kind[RowKind.UPDATE_AFTER][0].name == "it's"
    assert by_kind[RowKind.UPDATE_BEFORE][0].tags == {}


def test_a_value_given_to_a_field_of_type_null_is_taken_and_the_field_is_null(spark):
    """SeaTunnel's jobs give such fields values (a row written for every column); it takes
    them and the field is NULL, at any depth."""
    source = fake("""
        schema = { fields { id = int, c_null = "null", c_row { x = int, n = "null" }, c_list = "array<null>" } }
        rows = [{ kind = INSERT, fields = [1, "anything", {x = 2, n = 5}, [1, "b", null]] }]
    """)
    row = source.read(batch_ctx(spark)).collect()[0]
    assert (row.id, row.c_null, row.c_row.x, row.c_row.n, row.c_list) == (1, None, 2, None, [None, None, None])


def test_explicit_rows_with_only_inserts_report_insert_only():
    source = fake('schema = { fields { id = int } }\nrows = [{ kind = INSERT, fields = [1] }]')
    assert source.row_kinds() == frozenset({RowKind.INSERT})


def test_micro_batches_bound_rows_and_deliver_each_row_once(spark, tmp_path):
    body = """
        row.num = 30
        split.num = 2
        sequence.field = id
        schema = { fields { id = bigint, name = string, value = double } }
    """
    source = fake(body, parallelism=2)
    batches: dict[int, list] = {}
    streamed = source.read(stream_ctx(spark, 2, max_rows=16))
    assert streamed.isStreaming and streamed.columns == ["id", "name", "value", ROW_KIND_COLUMN]
    run_available_now(streamed, str(tmp_path / "ck"), batches)
    assert len(batches) >= 60 // 16
    assert all(0 < len(rows) <= 16 for rows in batches.values())
    streamed_rows = sorted(r for rows in batches.values() for r in rows)
    assert [r.id for r in streamed_rows] == list(range(60))
    # The same row numbers make the same rows whichever way they were read.
    assert streamed_rows == sorted(source.read(batch_ctx(spark, 2)).collect())


def test_restarted_query_replays_the_failed_batch_and_continues_without_duplicates(spark, tmp_path):
    body = """
        row.num = 12
        split.num = 3
        sequence.field = id
        schema = { fields { id = bigint, name = string } }
    """
    checkpoint = str(tmp_path / "ck")
    batches: dict[int, list] = {}
    with pytest.raises(Exception, match="injected failure"):
        run_available_now(fake(body, 2).read(stream_ctx(spark, 2, max_rows=6)), checkpoint,
                          batches, fail_on_batch=2)
    failed_attempt = batches[2]
    assert set(batches) == {0, 1, 2}
    run_available_now(fake(body, 2).read(stream_ctx(spark, 2, max_rows=6)), checkpoint, batches)
    assert batches[2] == failed_attempt          # the replay read exactly the same rows
    assert len(batches) > 3
    assert sorted(r.id for rows in batches.values() for r in rows) == list(range(24))


def test_layout_units_cover_every_row_once_within_the_unit_bound():
    layout = SplitLayout(readers=3, rows_per_reader=17, splits_per_reader=4, unit_rows=2)
    units = list(layout.units(0, layout.unit_count))
    assert [u.index for u in units] == list(range(layout.unit_count))
    assert sorted(g for u in units for g in range(u.start, u.stop)) == list(range(51))
    assert all(1 <= u.stop - u.start <= 2 for u in units)
    # Readers progress together: every split-0 unit comes before any split-1 unit.
    assert [u.split for u in units] == sorted(u.split for u in units)
    assert layout.admit(0, layout.unit_count, max_rows=5) == 2   # whole units, at most 5 rows
    assert layout.admit(0, layout.unit_count, max_rows=1) == 1   # but never an empty batch
    assert layout.admit(4, 4, max_rows=5) == 4


def test_reader_honours_read_limits_and_available_now_target():
    layout = SplitLayout(readers=2, rows_per_reader=10, splits_per_reader=2, unit_rows=5)
    reader = FakeSplitReader(stream_options(layout, max_rows=10, unbounded=False, interval_ms=0,
                                            partitions=2))
    start = reader.initialOffset()
    assert reader.getDefaultReadLimit() == ReadMaxRows(10)
    assert reader.latestOffset(start, ReadMaxRows(10))["splits"] == 2
    reader.prepareForTriggerAvailableNow()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end["splits"] == layout.unit_count == 4
    assert reader.latestOffset(end, ReadMaxRows(10)) == end     # nothing after the end
    parts = reader.partitions(start, end)
    described = [tuple(row.values()) for p in parts for batch in reader.read(p)
                 for row in batch.to_pylist()]
    assert sorted((s, e) for _, _, s, e in described) == [(0, 5), (5, 10), (10, 15), (15, 20)]


def test_unbounded_reader_admits_splits_over_time():
    layout = SplitLayout(readers=1, rows_per_reader=3, splits_per_reader=3, unit_rows=10)
    reader = FakeSplitReader(stream_options(layout, max_rows=100, unbounded=True,
                                            interval_ms=300, partitions=1))
    start = reader.initialOffset()
    first = reader.latestOffset(start, ReadMaxRows(100))
    assert first["splits"] == 1                       # only split 0 is due at once
    seen, offset = [1], first
    deadline = time.monotonic() + 10
    while offset["splits"] < 3 and time.monotonic() < deadline:
        offset = reader.latestOffset(offset, ReadMaxRows(100))
        if offset["splits"] != seen[-1]:
            seen.append(offset["splits"])
    assert seen == [1, 2, 3]                          # one more split per interval
    assert reader.latestOffset(offset, ReadMaxRows(100)) == offset   # idle at the end


def test_checkpoint_from_another_layout_is_refused():
    reader = FakeSplitReader(stream_options(SplitLayout(1, 10, 1, 5), max_rows=10, unbounded=False,
                                            interval_ms=0, partitions=1))
    foreign = {"splits": 1, "layout": "2x10/1/5"}
    with pytest.raises(PermanentError, match="same parallelism, row.num, split.num.*--fallback fresh"):
        reader.latestOffset(foreign, ReadMaxRows(10))


@pytest.mark.parametrize("body, option, fragment", [
    ("schema = { fields { a = bigintt } }", "schema.fields", "unknown type 'bigintt'"),
    ("int.min = 10\nint.max = 5\nschema = { fields { a = int } }", "int.min",
     "int.min (10) is greater than int.max (5)"),
    ("tinyint.max = 300\nschema = { fields { a = tinyint } }", "tinyint.max", "out of range for tinyint"),
    ("sequence.field = a\nschema = { fields { a = int } }", "sequence.field", "it must be a bigint field"),
    ("sequence.field = id\nschema = { fields { a = bigint } }", "sequence.field", "not in schema.fields"),
    ("string.fake.mode = template\nschema = { fields { a = string } }", "string.fake.mode",
     "needs string.template"),
    ("split.num = 0\nschema = { fields { a = int } }", "split.num", "at least 1"),
    ("date.month.template = [13]\nschema = { fields { a = date } }", "date.month.template", "1..12"),
    ("schema = { fields { a = int, b = string } }\nrows = [{ kind = INSERT, fields = [1] }]", "rows",
     "one value per schema field"),
    ("schema = { fields { a = int } }\nrows = [{ kind = UPSERT, fields = [1] }]", "rows",
     "unknown row kind"),
    ("schema = { fields { a = int } }\nrows = [{ kind = INSERT, fields = [\"x\"] }]", "rows",
     "'x' is not a valid int value"),
    ("schema = { fields { a = \"map<null, int>\" } }", "schema.fields", "map keys must not be null"),
])
def test_bad_options_are_refused_with_a_clear_message(body, option, fragment):
    with pytest.raises(ConfigError) as caught:
        fake(body)
    assert caught.value.option == option
    assert fragment in str(caught.value)
    assert "FakeSource" in str(caught.value)
