"""Console sink: rows printed with their kinds, numbered across batches."""

from __future__ import annotations

import datetime as dt
import io
from decimal import Decimal

import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.connectors.console import ConsoleSink, format_value
from seatide.plugin.base import Batch, SinkContext
from seatide.plugin.options import read_options
from seatide.plugin.rowkind import ALL_KINDS, ROW_KIND_COLUMN
from tests.sink_targets import apply_one


def context(spark, out) -> SinkContext:
    return SinkContext(spark, "job-1", 1, "sink[0]", False, False, out)


def batch(batch_id, previous=None) -> Batch:
    return Batch(batch_id, f"txn-{batch_id}", previous or {})


def test_console_prints_every_row_with_its_kind(spark):
    df = spark.createDataFrame(
        [(1, "abc", 3.5, 0), (2, None, None, 1), (2, 'say "hi"', 1.0, 2), (3, "x", 2.0, 3)],
        f"id int, name string, score double, {ROW_KIND_COLUMN} tinyint").coalesce(1)
    out = io.StringIO()
    sink = ConsoleSink(read_options({}, ConsoleSink.options))
    state = apply_one(sink, df, batch(0), context(spark, out))
    assert state == {"rows": 4, "total_rows": 4}
    assert out.getvalue().splitlines() == [
        "output rowType: id<int>, name<string>, score<double>",
        'rowIndex=1 kind=+I : 1, "abc", 3.5',
        "rowIndex=2 kind=-U : 2, null, null",
        'rowIndex=3 kind=+U : 2, "say \\"hi\\"", 1.0',
        'rowIndex=4 kind=-D : 3, "x", 2.0',
    ]
    assert ConsoleSink.accepted_row_kinds == ALL_KINDS


def test_row_numbers_continue_from_the_committed_state(spark):
    df = spark.createDataFrame([(7,)], "id bigint")
    out = io.StringIO()
    sink = ConsoleSink(read_options({}, ConsoleSink.options))
    state = apply_one(sink, df, batch(3, {"rows": 5, "total_rows": 5}), context(spark, out))
    assert state == {"rows": 1, "total_rows": 6}
    assert out.getvalue().splitlines()[-1] == "rowIndex=6 kind=+I : 7"


def test_print_data_false_only_counts(spark):
    df = spark.createDataFrame([(1,), (2,)], "id int")
    out = io.StringIO()
    sink = ConsoleSink(read_options({"log.print.data": False}, ConsoleSink.options))
    assert apply_one(sink, df, batch(0), context(spark, out)) == {"rows": 2, "total_rows": 2}
    assert out.getvalue() == ""


def test_values_are_spelled_out_by_type():
    assert format_value(dt.datetime(2024, 1, 2, 3, 4, 5)) == "2024-01-02 03:04:05"
    assert format_value(dt.date(2024, 1, 2)) == "2024-01-02"
    assert format_value(Decimal("1.50")) == "1.50"
    assert format_value([1, None, "a"]) == '[1, null, "a"]'
    assert format_value({"k": True}) == '{"k": true}'
    assert format_value(b"\x00\x01") == "b64:AAE="


def test_console_options_come_from_the_job_file(data_dir):
    job = load_job_text(f"""
        source {{ LocalFile {{ path = "{data_dir}", file_format_type = text }} }}
        sink {{ Console {{ log.print.data = false, log.print.delay.ms = 5 }} }}
    """)
    sink = job.sinks[0].plugin
    assert sink.opts["log.print.data"] is False and sink.opts["log.print.delay.ms"] == 5
    with pytest.raises(ConfigError, match="log.print.delay.ms' must be 0 or more"):
        load_job_text(f"""
            source {{ LocalFile {{ path = "{data_dir}", file_format_type = text }} }}
            sink {{ Console {{ log.print.delay.ms = -1 }} }}
        """)
