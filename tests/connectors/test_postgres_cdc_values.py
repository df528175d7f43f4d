"""Postgres-CDC values that Spark cannot hold as they are (finding 21 of issue 30): ``infinity``,
``-infinity``, dates before Christ and after the year 9999 fail the read naming the table, the
column, the value and the way out, in the snapshot and in changes alike, never become null; with
``infinity.handling = "clamp"`` the infinities become the first and last instants Spark holds."""

from __future__ import annotations

import datetime as dt

import pytest

from seatide.connectors.postgres_cdc.values import UnrepresentableValue, column_type
from seatide.plugin.base import PERMANENT_MARK, PermanentError
from tests.connectors.test_postgres_cdc import cdc_source, read_rows, reader_for, shop  # noqa: F401

LAST = dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
FIRST = dt.datetime(1, 1, 1)


@pytest.mark.parametrize("seatunnel, text", [
    ("date", "infinity"), ("date", "-infinity"), ("date", "0044-03-15 BC"), ("date", "10000-01-01"),
    ("timestamp", "infinity"), ("timestamp", "-infinity"), ("timestamp", "0044-03-15 10:00:00 BC"),
    ("timestamp_tz", "infinity"), ("timestamp_tz", "0044-03-15 10:00:00+00 BC"),
    ("array<date>", "{2024-01-01,infinity}"),
])
def test_a_value_spark_cannot_hold_is_refused_not_nulled(seatunnel, text):
    with pytest.raises(UnrepresentableValue) as caught:
        column_type(seatunnel, "UTC").convert(text)
    assert text.strip("{}").split(",")[-1] in str(caught.value)


@pytest.mark.parametrize("seatunnel, text, value", [
    ("date", "infinity", LAST.date()), ("date", "-infinity", FIRST.date()),
    ("timestamp", "infinity", LAST), ("timestamp", "-infinity", FIRST),
    ("timestamp_tz", "infinity", LAST.replace(tzinfo=dt.timezone.utc)),
    ("array<timestamp>", "{infinity,NULL}", [LAST, None]),
])
def test_clamp_maps_the_infinities_to_the_ends_of_sparks_range(seatunnel, text, value):
    assert column_type(seatunnel, "UTC", infinity="clamp").convert(text) == value
    bc = "{0044-03-15 BC}" if seatunnel.startswith("array") else "0044-03-15 BC"
    with pytest.raises(UnrepresentableValue, match="BC"):      # clamp is for the infinities alone
        column_type(seatunnel, "UTC", infinity="clamp").convert(bc)


def test_infinity_in_the_snapshot_and_in_changes_fails_naming_the_column_or_is_clamped(shop):  # noqa: F811
    conn, url, db = shop
    conn.execute("CREATE TABLE spans (id int PRIMARY KEY, valid_to timestamp, born date)")
    conn.execute("INSERT INTO spans VALUES (1, 'infinity', '2024-01-01')")
    reader = reader_for(cdc_source(url, f"{db}.public.spans"), "inf")
    try:
        start = reader.initialOffset()
        first = reader.latestOffset(start)
        with pytest.raises(PermanentError) as caught:
            read_rows(reader, start, first)
    finally:
        reader.stop()
    message = str(caught.value)
    assert message.startswith(PERMANENT_MARK)
    assert "public.spans" in message and "valid_to" in message and "'infinity'" in message
    assert 'infinity.handling = "clamp"' in message

    clamped = reader_for(cdc_source(url, f"{db}.public.spans", 'infinity.handling = "clamp"'), "clamp")
    try:
        start = clamped.initialOffset()
        first = clamped.latestOffset(start)
        assert [(r["id"], r["valid_to"]) for r in read_rows(clamped, start, first)] == [(1, LAST)]
        conn.execute("INSERT INTO spans VALUES (2, '-infinity', '2024-01-02')")
        conn.execute("UPDATE spans SET born = '0001-02-03 BC' WHERE id = 1")
        second = clamped.latestOffset(first)
        with pytest.raises(PermanentError) as caught:       # BC has no clamp: it fails in changes too
            read_rows(clamped, first, second)
        assert "born" in str(caught.value) and "0001-02-03 BC" in str(caught.value)
    finally:
        clamped.stop()


def test_an_unconstrained_numeric_with_more_decimals_than_18_fails_naming_the_column_not_rounded(shop):  # noqa: F811
    """numeric without precision reads as decimal(38, 18): a value with more decimals would be
    rounded into the target silently; it fails naming the column and the way out instead."""
    conn, url, db = shop
    conn.execute("CREATE TABLE rates (id int PRIMARY KEY, rate numeric)")
    conn.execute("INSERT INTO rates VALUES (1, 0.5)")
    reader = reader_for(cdc_source(url, f"{db}.public.rates"), "numeric")
    try:
        start = reader.initialOffset()
        first = reader.latestOffset(start)
        assert [(r["id"], str(r["rate"])) for r in read_rows(reader, start, first)] == [(1, "0.500000000000000000")]
        conn.execute("INSERT INTO rates VALUES (2, 0.1234567890123456789)")      # 19 decimals
        second = reader.latestOffset(first)
        with pytest.raises(PermanentError) as caught:
            read_rows(reader, first, second)
    finally:
        reader.stop()
    message = str(caught.value)
    assert "public.rates" in message and "column rate" in message and "0.1234567890123456789" in message
    assert "numeric(p, s)" in message
