"""LocalFile sink and source: formats, options, exactly-once publishing, file streams."""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
from decimal import Decimal

import pytest

from seatide import failpoints
from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.connectors.file.errors import LocalFileError
from seatide.connectors.file.paths import STAGING_DIR
from seatide.connectors.file.sink import LocalFileSink
from seatide.connectors.file.source import LocalFileSource
from seatide.connectors.file.target import LocalFileTarget
from seatide.plugin.base import Batch, ReadContext
from seatide.plugin.options import OptionError, read_options
from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.runtime.commit_log import FileDecisions, SinkCommitLog, write_json_atomic
from seatide.runtime.sink_runs import sink_run

ROWS = [
    (1, "alice", 3.5, True, dt.date(2024, 1, 2), dt.datetime(2024, 1, 2, 3, 4, 5), Decimal("10.25"), 10),
    (2, "bob", None, False, dt.date(2024, 2, 3), None, Decimal("0.50"), 20),
    (3, None, -1.0, None, None, dt.datetime(2024, 3, 4, 5, 6, 7), None, 10),
]
SCHEMA_DDL = ("id bigint, name string, score double, ok boolean, day date, at timestamp_ntz, "
              "price decimal(10,2), p int")
FIELDS = {"id": "bigint", "name": "string", "score": "double", "ok": "boolean", "day": "date",
          "at": "timestamp", "price": "decimal(10, 2)", "p": "int"}


def make_sink(**block) -> LocalFileSink:
    return LocalFileSink(read_options(block, LocalFileSink.options))


def make_source(**block) -> LocalFileSource:
    return LocalFileSource(read_options(block, LocalFileSource.options))


def frame(spark, rows=ROWS, ddl=SCHEMA_DDL, partitions=None):
    from pyspark.sql import functions as F

    df = spark.createDataFrame(rows, ddl)
    if partitions:
        df = df.repartition(partitions)
    return df.withColumn(ROW_KIND_COLUMN, F.lit(0).cast("tinyint"))


def read_ctx(spark, micro_batch=False, max_rows=1_000_000) -> ReadContext:
    return ReadContext(spark, micro_batch, False, 1, max_rows, 1000, "source[0]")


def write(sink, df, log, batch_id=0, staging_tag=""):
    return sink_run(sink, None, log, staging_tag=staging_tag).write(df, batch_id)


def files(state) -> list[str]:
    """The files of the one target of a LocalFile sink's batch state."""
    [target] = state["targets"].values()
    return target["files"]


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def data_files(root):
    found = []
    for directory, dirs, files in os.walk(root):
        found += [os.path.relpath(os.path.join(directory, f), root) for f in files]
    return sorted(found)


def rows_of(df):
    return sorted((tuple(r) for r in df.drop(ROW_KIND_COLUMN).collect()), key=repr)


@pytest.fixture
def log(data_dir):
    return SinkCommitLog(os.path.join(data_dir, "checkpoint", "sinks", "sink[0]"))


@pytest.mark.parametrize("fmt", ["text", "csv", "json", "parquet", "orc"])
def test_every_format_round_trips_through_sink_and_source(spark, data_dir, log, fmt):
    out = os.path.join(data_dir, "out")
    result = write(make_sink(path=out, file_format_type=fmt), frame(spark), log)
    assert result.state["rows"] == 3 and result.state["total_rows"] == 3
    assert all(f.startswith(os.path.join(out, "txn-0_")) for f in files(result.state))
    schema = {"schema": {"fields": FIELDS}} if fmt in ("text", "csv", "json") else {}
    got = make_source(path=out, file_format_type=fmt, **schema).read(read_ctx(spark))
    assert rows_of(got) == sorted(ROWS, key=repr)
    assert not os.path.exists(os.path.join(out, ".seatide-staging"))


def test_text_joins_fields_with_seatunnel_delimiter_and_writes_header(spark, data_dir, log):
    out = os.path.join(data_dir, "text")
    df = frame(spark, [(1, "a b", 2.5), (2, None, None)], "id int, s string, d double")
    write(make_sink(path=out, file_format_type="text", enable_header_write=True, single_file_mode=True), df, log)
    [name] = data_files(out)
    assert name.endswith(".txt")
    assert open(os.path.join(out, name)).read() == "id\x01s\x01d\n1\x01a b\x012.5\n2\x01\x01\n"


def test_text_custom_delimiters_round_trip(spark, data_dir, log):
    out = os.path.join(data_dir, "tabs")
    df = frame(spark, [(1, "x,y", 2.5)], "id int, s string, d double")
    write(make_sink(path=out, file_format_type="text", field_delimiter="\t", row_delimiter="\r\n"), df, log)
    [name] = data_files(out)
    assert open(os.path.join(out, name), newline="").read() == "1\tx,y\t2.5\r\n"
    got = make_source(path=out, file_format_type="text", field_delimiter="\t", row_delimiter="\r\n",
                      schema={"fields": {"id": "int", "s": "string", "d": "double"}}).read(read_ctx(spark))
    assert rows_of(got) == [(1, "x,y", 2.5)]


def test_csv_header_is_skipped_or_names_the_fields(spark, data_dir, log):
    out = os.path.join(data_dir, "csv")
    df = frame(spark, [(1, "a|b"), (2, "c")], "id int, s string")
    write(make_sink(path=out, file_format_type="csv", field_delimiter="|", enable_header_write=True), df, log)
    typed = make_source(path=out, file_format_type="csv", field_delimiter="|", skip_header_row_number=1,
                        schema={"fields": {"id": "int", "s": "string"}}).read(read_ctx(spark))
    assert rows_of(typed) == [(1, "a|b"), (2, "c")]
    named = make_source(path=out, file_format_type="csv", field_delimiter="|",
                        csv_use_header_line=True).read(read_ctx(spark))
    assert named.columns == ["id", "s", ROW_KIND_COLUMN] and rows_of(named) == [("1", "a|b"), ("2", "c")]


def test_date_and_datetime_formats_shape_text_values(spark, data_dir, log):
    out = os.path.join(data_dir, "dates")
    df = frame(spark, [(dt.date(2024, 1, 2), dt.datetime(2024, 1, 2, 3, 4, 5))], "d date, t timestamp_ntz")
    write(make_sink(path=out, file_format_type="csv", date_format="dd.MM.yyyy",
                    datetime_format="yyyyMMddHHmmss"), df, log)
    [name] = data_files(out)
    assert open(os.path.join(out, name)).read() == "02.01.2024,20240102030405\n"
    got = make_source(path=out, file_format_type="csv", date_format="dd.MM.yyyy", datetime_format="yyyyMMddHHmmss",
                      schema={"fields": {"d": "date", "t": "timestamp"}}).read(read_ctx(spark))
    assert rows_of(got) == [(dt.date(2024, 1, 2), dt.datetime(2024, 1, 2, 3, 4, 5))]


def test_text_without_schema_is_one_content_field_and_skips_header_lines(spark, data_dir):
    src = os.path.join(data_dir, "in")
    os.makedirs(src)
    with open(os.path.join(src, "a.txt"), "w") as handle:
        handle.write("# generated\n# by hand\ntyrant#26#male\nlucy#30#female\n")
    plain = make_source(path=src, file_format_type="text").read(read_ctx(spark))
    assert plain.columns == ["content", ROW_KIND_COLUMN] and plain.count() == 4
    skipped = make_source(path=src, file_format_type="text", skip_header_row_number=2).read(read_ctx(spark))
    assert rows_of(skipped) == [("lucy#30#female",), ("tyrant#26#male",)]
    typed = make_source(path=src, file_format_type="text", skip_header_row_number=2, field_delimiter="#",
                        schema={"fields": {"name": "string", "age": "int", "gender": "string"}})
    assert rows_of(typed.read(read_ctx(spark))) == [("lucy", 30, "female"), ("tyrant", 26, "male")]


def test_partitions_write_key_value_dirs_and_read_back_as_fields(spark, data_dir, log):
    out = os.path.join(data_dir, "parts")
    write(make_sink(path=out, file_format_type="parquet", have_partition=True, partition_by=["p"]),
          frame(spark), log)
    assert sorted({os.path.dirname(f) for f in data_files(out)}) == ["p=10", "p=20"]
    in_file = make_source(path=os.path.join(out, "p=20"), file_format_type="parquet").read(read_ctx(spark))
    assert "p" not in in_file.columns
    got = make_source(path=out, file_format_type="parquet").read(read_ctx(spark))
    assert rows_of(got.select(*FIELDS)) == sorted(ROWS, key=repr)


def test_partition_dir_expression_and_partition_field_in_file(spark, data_dir, log):
    out = os.path.join(data_dir, "custom_parts")
    sink = make_sink(path=out, file_format_type="json", have_partition=True, partition_by=["p", "ok"],
                     partition_dir_expression="region_${v0}/${k1}-${v1}", is_partition_field_write_in_file=True,
                     sink_columns=["p", "id"])
    write(sink, frame(spark), log)
    assert sorted({os.path.dirname(f) for f in data_files(out)}) == [
        "region_10/ok-null", "region_10/ok-true", "region_20/ok-false"]
    got = make_source(path=out, file_format_type="json", parse_partition_from_path=False,
                      schema={"fields": {"p": "int", "id": "bigint"}}).read(read_ctx(spark))
    assert rows_of(got) == [(10, 1), (10, 3), (20, 2)]


def test_partition_by_alone_partitions_with_values_written_as_seatunnel_writes_them(spark, data_dir, log):
    """SeaTunnel partitions whenever partition_by is given (have_partition or not, as its own
    jobs write it), and names a directory by the value's text: a timestamp as Java prints it,
    a NULL as null, other characters as they are (Spark's writer would escape ':' as %3A)."""
    out = os.path.join(data_dir, "seatunnel_parts")
    rows = [(1, dt.datetime(2024, 1, 2, 3, 4, 5), "a b:c"), (2, dt.datetime(2024, 1, 2, 3, 4, 0, 235000), None),
            (3, dt.datetime(2024, 1, 2, 3, 4), "x")]
    sink = make_sink(path=out, file_format_type="text", partition_by=["at", "tag"],
                     partition_dir_expression="${k0}=${v0}/${k1}=${v1}", is_partition_field_write_in_file=True)
    write(sink, frame(spark, rows, "id int, at timestamp_ntz, tag string"), log)
    files = data_files(out)
    assert sorted({os.path.dirname(f) for f in files}) == [
        "at=2024-01-02T03:04/tag=x", "at=2024-01-02T03:04:00.235/tag=null", "at=2024-01-02T03:04:05/tag=a b:c"]
    with open(os.path.join(out, next(f for f in files if "tag=x" in f))) as handle:   # the fields stay in the file
        assert handle.read().split("\001") == ["3", "2024-01-02T03:04:00.000", "x\n"]
    default = make_sink(path=os.path.join(data_dir, "default_parts"), file_format_type="csv", partition_by=["p"],
                        partition_dir_expression="${k0}=${v0}")
    write(default, frame(spark), log, batch_id=1)
    assert sorted({os.path.dirname(f) for f in data_files(os.path.join(data_dir, "default_parts"))}) == ["p=10", "p=20"]


def test_a_partition_dir_expression_without_partition_by_writes_no_partitions(spark, data_dir, log):
    """SeaTunnel's own file jobs set partition_dir_expression alone: it has nothing to fill."""
    out = os.path.join(data_dir, "flat")
    write(make_sink(path=out, file_format_type="json", partition_dir_expression="${k0}=${v0}"), frame(spark), log)
    assert all(os.sep not in f for f in data_files(out)) and data_files(out)


def test_custom_filename_expression_names_files_after_the_transaction(spark, data_dir, log):
    out = os.path.join(data_dir, "named")
    sink = make_sink(path=out, file_format_type="csv", custom_filename=True,
                     file_name_expression="orders_${now}", filename_time_format="yyyyMMdd")
    write(sink, frame(spark, partitions=1), log)
    today = dt.datetime.now().strftime("%Y%m%d")
    assert data_files(out) == [f"txn-0_orders_{today}_0.csv"]
    out2 = os.path.join(data_dir, "named2")
    sink2 = make_sink(path=out2, file_format_type="orc", custom_filename=True,
                      file_name_expression="${transactionId}-part", filename_extension="data")
    write(sink2, frame(spark, partitions=1), SinkCommitLog(os.path.join(data_dir, "ck2")))
    assert data_files(out2) == ["txn-0-part_0.data"]


def test_batch_size_sink_columns_and_compression(spark, data_dir, log):
    out = os.path.join(data_dir, "gz")
    sink = make_sink(path=out, file_format_type="csv", batch_size=2, compress_codec="gzip",
                     sink_columns=["name", "id"])
    result = write(sink, frame(spark, partitions=1), log)
    assert [os.path.basename(f) for f in files(result.state)] == ["txn-0_0.csv.gz", "txn-0_1.csv.gz"]
    got = make_source(path=out, file_format_type="csv",
                      schema={"fields": {"name": "string", "id": "bigint"}}).read(read_ctx(spark))
    assert rows_of(got) == sorted([("alice", 1), ("bob", 2), (None, 3)], key=repr)


def test_replayed_batch_is_not_written_again(spark, data_dir, log):
    out = os.path.join(data_dir, "once")
    sink = make_sink(path=out, file_format_type="parquet")
    first = write(sink, frame(spark), log)
    before = {f: os.stat(os.path.join(out, f)).st_mtime_ns for f in data_files(out)}
    again = write(sink, frame(spark), log)
    assert again.replayed and again.state == first.state
    assert {f: os.stat(os.path.join(out, f)).st_mtime_ns for f in data_files(out)} == before
    write(sink, frame(spark), log, batch_id=1)
    assert make_source(path=out, file_format_type="parquet").read(read_ctx(spark)).count() == 6
    assert log.committed(1)["total_rows"] == 6


def crash_after(monkeypatch, published: int) -> None:
    """Every LocalFile publish dies after ``published`` more files (a crash between renames)."""
    left = {"files": published}
    real = LocalFileTarget._publish_file

    def publish_file(self, src, dst):
        if left["files"] == 0:
            raise RuntimeError("simulated crash")
        left["files"] -= 1
        real(self, src, dst)

    monkeypatch.setattr(LocalFileTarget, "_publish_file", publish_file)


def published_files(root):
    return [f for f in data_files(root) if not f.startswith(STAGING_DIR)]


def test_batch_that_crashed_mid_publish_is_rolled_forward_once(spark, data_dir, log, monkeypatch):
    out = os.path.join(data_dir, "crash")
    sink = make_sink(path=out, file_format_type="csv", custom_filename=True,
                     file_name_expression="${transactionId}_${uuid}")   # names differ per attempt
    crash_after(monkeypatch, 1)
    with pytest.raises(RuntimeError, match="simulated crash"):
        write(sink, frame(spark, partitions=3), log, staging_tag="1")
    monkeypatch.undo()
    decided = FileDecisions(log).decided(0, "txn-0")
    assert len(published_files(out)) == 1 and len(files(decided["state"])) >= 2
    # The replay redoes nothing: it publishes the decided files (uuid names and all) once.
    result = write(sink, frame(spark, partitions=3), log, staging_tag="2")
    assert result.replayed and result.state == decided["state"]
    assert published_files(out) == sorted(os.path.relpath(f, out) for f in files(decided["state"]))
    assert not os.path.exists(os.path.join(out, STAGING_DIR))
    got = make_source(path=out, file_format_type="csv", schema={"fields": FIELDS}).read(read_ctx(spark))
    assert rows_of(got) == sorted(ROWS, key=repr)
    assert FileDecisions(log).unpublished() == []


def test_staged_but_undecided_batch_is_discarded_and_redone(spark, data_dir, log):
    out = os.path.join(data_dir, "undecided")
    sink = make_sink(path=out, file_format_type="json", custom_filename=True, file_name_expression="x_${uuid}")
    run = sink_run(sink, None, log, staging_tag="1")
    [(key, rows)] = run._rows(frame(spark), "txn-0").items()
    staged = run.targets.target(key).stage(rows, Batch(0, "txn-0", {}, staging_tag="1"))  # then a crash
    assert published_files(out) == [] and os.path.isdir(os.path.join(out, STAGING_DIR))
    result = write(sink, frame(spark), log, staging_tag="2")
    assert not result.replayed and not (set(staged.state["files"]) & set(files(result.state)))
    assert data_files(out) == sorted(os.path.relpath(f, out) for f in files(result.state))
    got = make_source(path=out, file_format_type="json", schema={"fields": FIELDS}).read(read_ctx(spark))
    assert got.count() == 3


def test_reader_sees_no_file_of_a_batch_held_before_its_decision(spark, data_dir, log, monkeypatch, tmp_path):
    out = os.path.join(data_dir, "held")
    gate = tmp_path / "decide"
    monkeypatch.setitem(failpoints._POINTS, "sink.before_decision", f"gate:0:{gate}")
    monkeypatch.setitem(failpoints._HITS, "sink.before_decision", 0)
    sink = make_sink(path=out, file_format_type="csv")
    outcome = {}
    writer = threading.Thread(target=lambda: outcome.update(result=write(sink, frame(spark, partitions=2), log)))
    writer.start()
    try:
        wait_until(lambda: failpoints._HITS["sink.before_decision"] == 1, 120, "the batch staged, held before its decision")
        staged = [f for f in data_files(out) if f.startswith(STAGING_DIR) and f.endswith(".csv")]
        assert staged, "the batch is staged"
        assert published_files(out) == [], "a reader of the output sees an undecided batch"
        assert FileDecisions(log).decided(0, "txn-0") is None and log.committed(0) is None
    finally:
        gate.touch()
        writer.join(120)
    assert sorted(os.path.relpath(f, out) for f in files(outcome["result"].state)) == published_files(out)
    assert len(published_files(out)) == 2


def test_files_published_by_an_older_seatide_before_its_commit_are_undone(spark, data_dir, log):
    """A checkpoint written before the decision existed: its intent lists what to remove."""
    out = os.path.join(data_dir, "legacy")
    os.makedirs(out)
    stray = os.path.join(out, "txn-0_0.csv")
    with open(stray, "w") as handle:
        handle.write("99\n")
    write_json_atomic(os.path.join(log.root, "intent", "0.json"), {"files": [stray], "staging": None})
    result = write(make_sink(path=out, file_format_type="csv"), frame(spark), log)
    assert log.intent(0) is None
    got = make_source(path=out, file_format_type="csv", schema={"fields": FIELDS}).read(read_ctx(spark))
    assert rows_of(got) == sorted(ROWS, key=repr) and result.state["rows"] == 3


def test_empty_batch_publishes_nothing_unless_asked(spark, data_dir, log):
    empty = frame(spark, [], "id int")
    out = os.path.join(data_dir, "empty")
    assert files(write(make_sink(path=out, file_format_type="csv"), empty, log).state) == []
    assert data_files(out) == []
    out2 = os.path.join(data_dir, "empty2")
    sink = make_sink(path=out2, file_format_type="parquet", create_empty_file_when_no_data=True)
    write(sink, empty, SinkCommitLog(os.path.join(data_dir, "ck2")))
    assert data_files(out2) == ["txn-0_0.parquet"]


@pytest.mark.parametrize("block, option, words", [
    ({"file_format_type": "csv", "compress_codec": "lzo"}, "compress_codec", "available: none, gzip"),
    ({"custom_filename": True, "file_name_expression": "${day}"}, "file_name_expression", "${day}"),
    ({"custom_filename": True, "filename_time_format": "yyyy-QQ"}, "filename_time_format", "'Q'"),
    ({"have_partition": True}, "partition_by", "partition_by is empty"),
    ({"have_partition": True, "partition_by": ["a"], "partition_dir_expression": "${k1}"},
     "partition_dir_expression", "partition_by has 1 field"),
    ({"path": "hdfs://nn/x"}, "path", "not a local path"),
    ({"encoding": "klingon"}, "encoding", "unknown encoding"),
])
def test_sink_rejects_bad_options_with_the_option_named(data_dir, block, option, words):
    with pytest.raises(OptionError) as error:
        make_sink(**{"path": data_dir, **block})
    assert error.value.option == option and words in str(error.value)


def test_source_rejects_bad_options_with_the_option_named(data_dir):
    with pytest.raises(OptionError, match="json needs a schema") as error:
        make_source(path=data_dir, file_format_type="json")
    assert error.value.option == "schema.fields"
    with pytest.raises(OptionError, match="not a regular expression"):
        make_source(path=data_dir, file_format_type="orc", file_filter_pattern="(")
    with pytest.raises(OptionError, match="read_columns names nope"):
        make_source(path=data_dir, file_format_type="csv", read_columns=["nope"],
                    schema={"fields": {"a": "int"}})


def test_missing_path_or_unreadable_schema_fail_the_job_permanently(spark, data_dir):
    with pytest.raises(LocalFileError, match="does not exist"):
        make_source(path=os.path.join(data_dir, "nowhere"), file_format_type="orc").read(read_ctx(spark))
    with pytest.raises(LocalFileError, match="no parquet files under .* declare schema"):
        make_source(path=data_dir, file_format_type="parquet").read(read_ctx(spark, micro_batch=True))


def test_source_filters_files_and_projects_columns(spark, data_dir):
    src = os.path.join(data_dir, "mixed")
    os.makedirs(os.path.join(src, "day1"))
    os.makedirs(os.path.join(src, ".seatide-staging", "t"))
    files = {"day1/abc1.csv": "1,a\n", "day1/abd2.csv": "2,b\n", "abc3.txt": "3,c\n", "top.csv": "4,d\n",
             ".seatide-staging/t/abc9.csv": "9,z\n", "_abc8.csv": "8,y\n"}
    for name, text in files.items():
        with open(os.path.join(src, name), "w") as handle:
            handle.write(text)
    every = {"schema": {"fields": {"id": "int", "s": "string"}}, "parse_partition_from_path": False}
    by_name = make_source(path=src, file_format_type="csv", file_filter_pattern="abc.*", read_columns=["s"], **every)
    assert rows_of(by_name.read(read_ctx(spark))) == [("a",), ("c",)]
    by_ext = make_source(path=src, file_format_type="csv", filename_extension="csv", **every)
    assert rows_of(by_ext.read(read_ctx(spark))) == [(1, "a"), (2, "b"), (4, "d")]
    by_path = make_source(path=src, file_format_type="csv", file_filter_pattern=src + "/day1/.*2\\.csv", **every)
    assert rows_of(by_path.read(read_ctx(spark))) == [(2, "b")]
    top_only = make_source(path=src, file_format_type="csv", filename_extension=".csv",
                           schema={"fields": {"id": "int", "s": "string"}})   # day1 is no key=value dir
    assert rows_of(top_only.read(read_ctx(spark))) == [(4, "d")]


def test_micro_batch_source_streams_files_in_bounded_batches(spark, data_dir, log):
    from pyspark.sql import functions as F

    out = os.path.join(data_dir, "stream_in")
    sink = make_sink(path=out, file_format_type="csv", have_partition=True, partition_by=["p"])
    for batch_id in range(2):
        write(sink, frame(spark, [(batch_id * 2 + 1, 10), (batch_id * 2 + 2, 20)], "id int, p int"), log, batch_id)
    with open(os.path.join(out, "p=10", "skip_me.txt"), "w") as handle:
        handle.write("99\n")
    source = make_source(path=out, file_format_type="csv", file_filter_pattern=".*\\.csv",
                         schema={"fields": {"id": "int"}})
    df = source.read(read_ctx(spark, micro_batch=True, max_rows=1))   # tiny bound: one file per batch
    assert df.isStreaming
    batches = []
    query = (df.writeStream.trigger(availableNow=True)
             .option("checkpointLocation", os.path.join(data_dir, "stream_ck"))
             .foreachBatch(lambda batch_df, batch_id: batches.append(
                 sorted(tuple(r) for r in batch_df.select("id", "p", F.col(ROW_KIND_COLUMN)).collect())))
             .start())
    query.awaitTermination()
    rows = sorted(r for b in batches for r in b)
    assert rows == [(1, 10, 0), (2, 20, 0), (3, 10, 0), (4, 20, 0)]
    assert len([b for b in batches if b]) == 4


def test_job_file_builds_local_file_plugins_from_hocon(data_dir):
    job = load_job_text(f"""
        env {{ job.mode = BATCH }}
        source {{
          LocalFile {{
            path = "file://{data_dir}/in"
            file_format_type = text
            field_delimiter = "\\t"
            schema = {{ fields {{ name = string, age = int }} }}
            plugin_output = people
          }}
        }}
        sink {{
          LocalFile {{
            path = "{data_dir}/out"
            file_format = parquet
            have_partition = true
            partition_by = [age]
            partition_dir_expression = "${{k0}}=${{v0}}"
            custom_filename = true
            file_name_expression = "${{transactionId}}_${{now}}"
            is_enable_transaction = true
            tmp_path = "/tmp/seatunnel"
          }}
        }}
    """)
    source, sink = job.sources[0].plugin, job.sinks[0].plugin
    assert source.root == os.path.join(data_dir, "in") and source.plan.delimiter == "\t"
    assert [f.name for f in source.schema()] == ["name", "age"]
    assert sink.spec().partition_by == ("age",) and sink.spec().file_format == "parquet"
    with pytest.raises(ConfigError, match="compress_codec 'brotli'"):
        load_job_text(f'source {{ LocalFile {{ path = "{data_dir}", file_format_type = orc }} }}\n'
                      f'sink {{ LocalFile {{ path = "{data_dir}/o", file_format_type = parquet, '
                      'compress_codec = brotli } }')


def test_stream_restarted_after_a_crash_writes_every_row_once(spark, data_dir, log, monkeypatch):
    """File stream -> LocalFile sink through the commit log; Spark replays the crashed batch."""
    src, out = os.path.join(data_dir, "src"), os.path.join(data_dir, "dst")
    for batch_id in range(2):
        write(make_sink(path=src, file_format_type="json"), frame(spark, partitions=1),
              SinkCommitLog(os.path.join(data_dir, "src_log")), batch_id)
    sink = make_sink(path=out, file_format_type="csv", custom_filename=True, file_name_expression="${uuid}")
    source = make_source(path=src, file_format_type="json", schema={"fields": FIELDS})

    def run():
        def each_batch(batch_df, batch_id):
            write(sink, batch_df, log, batch_id)
        query = (source.read(read_ctx(spark, micro_batch=True, max_rows=1)).writeStream
                 .trigger(availableNow=True).option("checkpointLocation", os.path.join(data_dir, "ck"))
                 .foreachBatch(each_batch).start())
        query.awaitTermination()

    crash_after(monkeypatch, 1)   # batch 1 dies after its decision
    with pytest.raises(Exception, match="simulated crash"):
        run()
    monkeypatch.undo()
    assert log.committed(0) is not None and FileDecisions(log).decided(1, "txn-1") is not None
    assert log.committed(1) is None
    run()
    got = make_source(path=out, file_format_type="csv", schema={"fields": FIELDS}).read(read_ctx(spark))
    assert rows_of(got) == sorted(ROWS + ROWS, key=repr)
    assert not os.path.exists(os.path.join(out, ".seatide-staging"))
