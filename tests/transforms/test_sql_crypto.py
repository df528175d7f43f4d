"""Functions beyond SeaTunnel's reference (AES/DES/HEX/BASE64 _ENC/_DEC) and env-wide UDFs.

Expected ciphertexts are computed here with pycryptodome's raw ciphers (AES, DES in ECB
with PKCS#7 padding written out by hand), independently of SeaTide's rewrites: AES runs
in Spark's JVM, DES in SeaTide's pandas UDF. The DES primitive itself is first checked
against the textbook vector, so the test does not merely agree with itself.
"""

from __future__ import annotations

import base64
import json
import os

import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from tests.transforms.conftest import job_text
from tests.transforms.test_sql_functions import EXAMPLES, NULL, local, run_ok, sql_job  # noqa: F401

pytestmark = pytest.mark.spark

AES_KEY, AES_KEY_256, DES_KEY = "0123456789abcdef", "k" * 32, "des-key-long"
TEXT = "Joy Ding 丁"
LONG = "x" * 200          # Base64 longer than one MIME line (76 characters): must stay one line


def _pad(data: bytes, block: int) -> bytes:
    n = block - len(data) % block
    return data + bytes([n]) * n


def aes(text: str, key: str) -> bytes:
    from Crypto.Cipher import AES

    return AES.new(key.encode(), AES.MODE_ECB).encrypt(_pad(text.encode(), 16))


def des(text: str, key: str) -> bytes:
    from Crypto.Cipher import DES

    return DES.new(key.encode()[:8], DES.MODE_ECB).encrypt(_pad(text.encode(), 8))


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def test_des_primitive_matches_the_textbook_vector():
    from Crypto.Cipher import DES

    cipher = DES.new(bytes.fromhex("133457799BBCDFF1"), DES.MODE_ECB)
    assert cipher.encrypt(bytes.fromhex("0123456789ABCDEF")).hex().upper() == "85E813540F0AB405"


def test_encrypt_decrypt_and_encode_functions(local):
    fields = {"name": "string", "nothing": "string", "long": "string",
              "aes_b64": "string", "aes_hex": "string", "des_b64": "string", "des_hex": "string"}
    row = [TEXT, None, LONG, b64(aes(TEXT, AES_KEY)), aes(TEXT, AES_KEY).hex(),
           b64(des(TEXT, DES_KEY)), des(TEXT, DES_KEY).hex().upper()]
    calls = {
        "aes_enc": f"AES_ENC(name, '{AES_KEY}')",
        "aes_enc_256": f"aes_enc(name, '{AES_KEY_256}')",
        "aes_enc_long": f"AES_ENC(long, '{AES_KEY}')",
        "aes_dec_b64": f"AES_DEC(aes_b64, '{AES_KEY}')",
        "aes_dec_hex": f"AES_DEC(aes_hex, '{AES_KEY}')",
        "aes_round": f"AES_DEC(AES_ENC(name, '{AES_KEY_256}'), '{AES_KEY_256}')",
        "aes_empty": f"AES_ENC('', '{AES_KEY}')",
        "aes_null": f"AES_DEC(nothing, '{AES_KEY}')",
        "des_enc": f"DES_ENC(name, '{DES_KEY}')",
        "des_enc_long": f"DES_ENC(long, '{DES_KEY}')",
        "des_dec_b64": f"DES_DEC(des_b64, '{DES_KEY}')",
        "des_dec_hex": f"DES_DEC(des_hex, '{DES_KEY}')",
        "des_round": f"DES_DEC(DES_ENC(long, '12345678'), '12345678')",
        "des_empty": f"DES_ENC('', '{DES_KEY}')",
        "des_null": f"DES_DEC(nothing, '{DES_KEY}')",
        "hex_enc": "HEX_ENC(name)",
        "hex_round": "HEX_DEC(HEX_ENC(name, 'ignored'))",
        "b64_enc": "BASE64_ENC(long)",
        "b64_round": "BASE64_DEC(BASE64_ENC(name))",
        "b64_null": "BASE64_ENC(nothing)",
        "hex_empty": "HEX_DEC('')",
    }
    expect = {
        "aes_enc": ("string", b64(aes(TEXT, AES_KEY))),
        "aes_enc_256": ("string", b64(aes(TEXT, AES_KEY_256))),
        "aes_enc_long": ("string", b64(aes(LONG, AES_KEY))),
        "aes_dec_b64": ("string", TEXT), "aes_dec_hex": ("string", TEXT), "aes_round": ("string", TEXT),
        "aes_empty": ("string", NULL), "aes_null": ("string", NULL),
        "des_enc": ("string", b64(des(TEXT, DES_KEY))),
        "des_enc_long": ("string", b64(des(LONG, DES_KEY))),
        "des_dec_b64": ("string", TEXT), "des_dec_hex": ("string", TEXT), "des_round": ("string", LONG),
        "des_empty": ("string", NULL), "des_null": ("string", NULL),
        "hex_enc": ("string", TEXT.encode().hex()), "hex_round": ("string", TEXT),
        "b64_enc": ("string", b64(LONG.encode())), "b64_round": ("string", TEXT),
        "b64_null": ("string", NULL), "hex_empty": ("string", NULL),
    }
    query = "select " + ", ".join(f"{calls[n]} as {n}" for n in expect) + " from fake"
    run_ok(local, sql_job(fields, row, query, expect))     # \uXXXX escapes in the job's strings decode


@pytest.mark.parametrize("call, message", [
    ("AES_ENC(name)", "AES_ENC needs a key: SeaTunnel's UDF falls back to a built-in key"),
    ("DES_DEC(name)", "DES_DEC needs a key"),
    ("AES_DEC(name, 'short')", "AES_DEC: the key is 5 bytes; AES takes a key of 16, 24 or 32 bytes"),
    ("DES_ENC(name, '1234567')", "DES_ENC: the key is 7 bytes; DES takes a key of at least 8 bytes"),
    ("AES_ENC(name, 'k', 'x')", "AES_ENC takes 2 arguments (value, key), not 3"),
    ("SM4_ENC(name, 'k')", "unknown function SM4_ENC"),
])
def test_crypto_calls_without_a_usable_key_fail_validation(call, message):
    with pytest.raises(ConfigError) as err:
        load_job_text(job_text(f'Sql {{ plugin_input = "fake", query = """select {call} from fake""" }}'))
    assert err.value.option == "query" and message in str(err.value)


def test_decrypting_what_is_not_ciphertext_fails_naming_the_function(spark, ctx):
    from seatide.plugin.rowkind import RowKind
    from tests.transforms.conftest import frame, transform_from

    df = frame(spark, [("bm90IGNpcGhlcg==", RowKind.INSERT)], "c string")
    out = transform_from('Sql { plugin_input = "fake", query = "select DES_DEC(c, \'12345678\') as p from fake" }').apply(df, ctx)
    with pytest.raises(Exception, match="DES_DEC: 'bm90IGNpcGhlcg==' is not DES ciphertext"):
        out.collect()


def _udfs() -> str:
    return os.path.abspath(os.path.join(EXAMPLES, "udfs", "text_udfs.py"))


def test_env_udfs_reach_the_sql_transform_and_its_own_win(local):
    env = (f'env {{ job.mode = "BATCH", sql.udfs = ["{_udfs()}:mask", '
           f'{{ function = "{_udfs()}:with_tax", returns = "double", name = TAXED }}] }}')
    own = 'udfs = [{ function = "json:dumps", returns = "string", name = TAXED }]'
    expect = {"masked": ("string", "J*******"), "taxed": ("string", "10.0")}
    query = "select mask(name) as masked, taxed(price) as taxed from fake"
    text = sql_job({"name": "string", "price": "double"}, ["Joy Ding", 10.0], query, expect, own)
    run_ok(local, text.replace('env { job.mode = "BATCH" }', env))


def test_env_udfs_alone_are_validated_at_load():
    env = f'env {{ sql.udfs = [{{ function = "{_udfs()}:with_tax", returns = "double", name = TAXED }}] }}'
    text = job_text('Sql { plugin_input = "fake", query = "select taxed(1.0, 0.5) as t from fake" }')
    job = load_job_text(text.replace('env { job.mode = "BATCH" }', env))
    assert sorted(job.transforms[0].plugin._udfs) == ["TAXED"]


@pytest.mark.parametrize("udfs, message", [
    ('["json"]', "must be written module:function"),
    ('["no_such_module_xyz:f"]', "cannot import no_such_module_xyz"),
    ('[{ function = "json:dumps", returns = "dubble" }]', "'dubble' is not a Spark SQL type"),
])
def test_bad_env_udfs_fail_validation(udfs, message):
    text = job_text('Sql { plugin_input = "fake", query = "select 1 from fake" }')
    with pytest.raises(ConfigError) as err:
        load_job_text(text.replace('env { job.mode = "BATCH" }', f"env {{ sql.udfs = {udfs} }}"))
    assert err.value.option == "sql.udfs" and err.value.plugin == "env" and message in str(err.value)


def test_docs_give_every_crypto_function_a_status():
    import re

    from seatide.sql.crypto import CRYPTO_FUNCTIONS

    with open(os.path.join(EXAMPLES, "..", "docs", "sql.md")) as handle:
        rows = dict(re.findall(r"^\| `([A-Z0-9_]+)` \| ([^|]+) \|", handle.read(), re.M))
    assert set(CRYPTO_FUNCTIONS) | {"SM4_ENC", "SM4_DEC"} <= set(rows)
