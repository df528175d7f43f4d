"""Where Spark's SQL and SeaTunnel's disagree on a result's type or on what a call means,
SeaTide gives SeaTunnel's: one job each, FakeSource -> Sql -> Assert (which checks the type).

The expected values are SeaTunnel's (its SQL engine's rules: ZetaSQLType and its functions);
the DES vectors come from Java's javax.crypto with SeaTunnel's parameters (DES/CBC/PKCS5Padding,
IV "12345678", DESKeySpec of the password's UTF-8 bytes).
"""

from __future__ import annotations

import math

import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.sql.zeta_udfs import chinese_number
from tests.transforms.conftest import job_text
from tests.transforms.test_sql_functions import NULL, local, run_ok, sql_job  # noqa: F401 - local is a fixture

pytestmark = pytest.mark.spark

FIELDS = {"id": "int", "big": "bigint", "tiny": "tinyint", "price": "decimal(10, 2)", "f": "float",
          "d": "double", "stamp": "timestamp", "day": "date", "s": "string",
          "m": "map<string, string>"}
ROW = [7, 1700000000123, 3, "12.34", 1.5, 13.2, "2021-04-15T13:34:45.235", "2021-04-08", "2021-04-08",
       {"k": "v"}]


def test_literals_and_arithmetic_have_seatunnels_result_types(local):
    calls = {
        "lit_sum": "1.1 + 1.1", "lit": "2.5", "neg": "-2.5", "int_div": "id / 2", "lit_div": "7 / 2",
        "big_div": "big / 1000", "tiny_sum": "tiny + tiny", "dec_mul": "price * price", "dec_lit": "price + 1.5",
        "float_sum": "f + f", "int_by_lit": "id * 1.5", "rounded": "ROUND(1.25, 1)", "mod_lit": "MOD(id, 5.4)",
        "mod_int": "MOD(id, 5)", "mixed": "(id + big) / 2", "trunc_digits": "TRUNC(d, 1)",
        "ceil_sum": "CEIL(d + 1)", "mod_double": "MOD(d, 5.4)", "mod_neg": "MOD(-d, 5.4)", "mod_float": "MOD(f, f)", "mod_of_float": "MOD(f, 0.4)",
        "mod_dec": "MOD(price, 5)", "mod_dec_lit": "MOD(price, 0.1)", "mod_big_int": "MOD(big, 1000)",
        "mod_huge": "MOD(1e300, 7.5)", "mod_tiny": "MOD(d, 3e-20)",
    }
    expect = {
        "lit_sum": ("double", 2.2), "lit": ("double", 2.5), "neg": ("double", -2.5), "int_div": ("int", 3),
        "lit_div": ("int", 3), "big_div": ("bigint", 1700000000), "tiny_sum": ("int", 6),
        "dec_mul": ("decimal(10, 2)", 152.28), "dec_lit": ("decimal(10, 2)", 13.84), "float_sum": ("double", 3.0),
        "int_by_lit": ("double", 10.5), "rounded": ("double", 1.3), "mod_lit": ("double", 1.6),
        "mod_int": ("int", 2), "mixed": ("bigint", 850000000065),
        "trunc_digits": ("double", 13.2), "ceil_sum": ("double", 15.0),      # the page: the argument's type
        # MOD in decimal, as SeaTunnel computes it, of the numbers as written: 7 % 5.4 is 1.6, not
        # 1.5999999999999996; a double beyond what a DECIMAL(38, 18) holds keeps the double remainder
        "mod_double": ("double", 2.4), "mod_neg": ("double", -2.4), "mod_float": ("float", 0.0),
        "mod_dec": ("decimal(10, 2)", "2.34"), "mod_dec_lit": ("double", 0.04), "mod_big_int": ("bigint", 123),
        "mod_of_float": ("double", 0.3), "mod_huge": ("double", math.fmod(1e300, 7.5)), "mod_tiny": ("double", math.fmod(13.2, 3e-20)),
    }
    query = "select " + ", ".join(f"{calls[n]} as {n}" for n in expect) + " from fake"
    run_ok(local, sql_job(FIELDS, ROW, query, expect))


def test_extract_takes_every_field_name_seatunnel_does(local):
    names = {"doy_long": "DAYOFYEAR", "doy": "DOY", "dow": "DAYOFWEEK", "isodow": "ISODOW", "year": "YEAR",
             "quarter": "QUARTER", "second": "SECOND", "ms": "MILLISECOND", "century": "CENTURY",
             "decade": "DECADE", "isoyear": "ISOYEAR", "millennium": "MILLENNIUM"}
    expect = {"doy_long": ("int", 105), "doy": ("int", 105), "dow": ("int", 4), "isodow": ("int", 4),
              "year": ("int", 2021), "quarter": ("int", 2), "second": ("int", 45), "ms": ("int", 235),
              "century": ("int", 21), "decade": ("int", 202), "isoyear": ("int", 2021), "millennium": ("int", 3),
              "day_doy": ("int", 98)}
    query = ("select " + ", ".join(f"extract({names[n]} FROM stamp) as {n}" for n in names)
             + ", extract(DAYOFYEAR FROM day) as day_doy from fake")
    run_ok(local, sql_job(FIELDS, ROW, query, expect))


def test_casts_read_epoch_milliseconds_and_digit_dates_as_seatunnel_does(spark, local):
    import datetime as dt
    from zoneinfo import ZoneInfo

    zone = ZoneInfo(spark.conf.get("spark.sql.session.timeZone"))       # SeaTunnel: the JVM's zone
    local_time = dt.datetime.fromtimestamp(ROW[1] / 1000, zone).replace(tzinfo=None).isoformat(timespec="milliseconds")
    query = ("select cast(big as timestamp) as from_epoch, cast(20210408 as date) as from_digits, "
             "cast(133445 as time) as time_from_digits, cast(stamp as date) as to_date from fake")
    expect = {"from_epoch": ("timestamp", local_time), "from_digits": ("date", "2021-04-08"),
              "time_from_digits": ("time", "13:34:45"), "to_date": ("date", "2021-04-15")}
    run_ok(local, sql_job(FIELDS, ROW, query, expect))


def test_des_encrypt_decrypt_and_chinese_to_num_are_seatunnels_built_in_udfs(local):
    calls = {"enc": "DES_ENCRYPT('12345678', s)", "dec": "DES_DECRYPT('12345678', 'dHBenrzCO55ziCFRLKL8UQ==')",
             "long_key": "DES_ENCRYPT('my-long-password', 'héllo wörld, a longer text')",
             "not_cipher": "DES_DECRYPT('12345678', 'not-cipher')", "null_key": "DES_ENCRYPT(CAST(NULL AS STRING), s)",
             "cn": "CHINESE_TO_NUM('一千二百三十四')", "cn_big": "CHINESE_TO_NUM('壹万贰仟零叁')",
             "cn_blank": "CHINESE_TO_NUM(' ')"}
    expect = {"enc": ("string", "dHBenrzCO55ziCFRLKL8UQ=="), "dec": ("string", "2021-04-08"),
              "long_key": ("string", "jOkifFcVgyWp/eTSVJFvxEeBPamKSdFwWWtgaJUBjs4="),
              "not_cipher": ("string", "not-cipher"), "null_key": ("string", NULL),
              "cn": ("bigint", 1234), "cn_big": ("bigint", 12003), "cn_blank": ("bigint", NULL)}
    query = "select " + ", ".join(f"{calls[n]} as {n}" for n in expect) + " from fake"
    run_ok(local, sql_job(FIELDS, ROW, query, expect))


@pytest.mark.parametrize(("text", "number"), [("十二", 12), ("三万五千", 35000), ("一亿零一", 100000001),
                                              ("二十万亿", 20 * 10 ** 12), ("零", 0), ("贰佰", 200)])
def test_chinese_numerals(text, number):
    assert chinese_number(text) == number


def test_a_short_des_password_or_a_stray_character_is_refused_naming_it():
    with pytest.raises(ConfigError, match="DES_ENCRYPT: the password .* is 7 characters; it must be at least 8"):
        load_job_text(job_text('Sql { query = "select DES_ENCRYPT(\'1234567\', name) as e from fake" }'))
    with pytest.raises(ValueError, match="'1千' holds '1', which is not a Chinese numeral"):
        chinese_number("1千")


def test_a_missing_map_key_is_null_and_meets_field_type_null(local):
    """SeaTunnel's own job does this: a map value by a key no row has, asserted as type null."""
    query = "select m.nope as dotted, m['nope'] as bracketed, m.k as present from fake"
    expect = {"dotted": ("null", NULL), "bracketed": ("null", NULL), "present": ("string", "v")}
    run_ok(local, sql_job(FIELDS, ROW, query, expect))
