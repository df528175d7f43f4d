"""Config encryption (env shade.identifier): base64 as SeaTunnel has it, SeaTide's aes256, and each error."""

from __future__ import annotations

import base64
import json

import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.config.shade import KEY_FILE_ENV, ShadeError, decrypt_config, encrypt_config

# The encrypt-config example of SeaTunnel's REST API v2 page: its answer's ciphertexts are
# the Base64 of the clear values, which SeaTide must reproduce byte for byte.
SEATUNNEL_EXAMPLE = {
    "env": {"parallelism": 1, "shade.identifier": "base64"},
    "source": [{"plugin_name": "MySQL-CDC", "result_table_name": "fake", "parallelism": 1,
                "hostname": "127.0.0.1", "username": "seatunnel", "password": "seatunnel_password",
                "table-name": "inventory_vwyw0n"}],
    "transform": [],
    "sink": [{"plugin_name": "Clickhouse", "host": "localhost:8123", "database": "default", "table": "fake_all",
              "username": "seatunnel", "password": "seatunnel_password"}],
}


def _job(shade: str, path: str, extra_env: str = "") -> str:
    """FakeSource -> LocalFile whose path is covered by the shade (shade.options), plus a password-like Sql."""
    return f"""
env {{
  job.mode = BATCH
  shade.identifier = "{shade}"
  shade.options = ["path"]
  {extra_env}
}}
source {{ FakeSource {{ row.num = 3, schema = {{ fields {{ id = bigint }} }} }} }}
sink {{ LocalFile {{ path = "{path}", file_format_type = "json" }} }}
"""


def _sink_path(config) -> str:
    return config.sinks[0].plugin.opts["path"]


def _key_file(tmp_path, name: str = "key", raw: bytes = bytes(range(32))) -> str:
    path = tmp_path / name
    path.write_text(base64.b64encode(raw).decode())
    return str(path)


def test_base64_encrypt_config_gives_seatunnels_ciphertexts_and_decrypts_back():
    encrypted = encrypt_config(SEATUNNEL_EXAMPLE)
    for block in (encrypted["source"][0], encrypted["sink"][0]):
        assert block["username"] == "c2VhdHVubmVs"
        assert block["password"] == "c2VhdHVubmVsX3Bhc3N3b3Jk"
    assert encrypted["sink"][0]["host"] == "localhost:8123"        # not a covered option
    assert encrypted["env"] == SEATUNNEL_EXAMPLE["env"]
    assert decrypt_config(encrypted) == SEATUNNEL_EXAMPLE
    assert SEATUNNEL_EXAMPLE["source"][0]["password"] == "seatunnel_password"    # input left alone


def test_no_shade_leaves_the_config_as_written():
    tree = {**SEATUNNEL_EXAMPLE, "env": {"parallelism": 1}}
    assert encrypt_config(tree) == tree


def test_hocon_style_blocks_and_list_values_are_encrypted_each():
    tree = {"env": {"shade": {"identifier": "base64", "options": ["hosts"]}},
            "source": {"Jdbc": {"password": "pw", "hosts": ["a", "b"]}}, "sink": {"Console": {}}}
    out = encrypt_config(tree)["source"]["Jdbc"]
    assert out == {"password": "cHc=", "hosts": ["YQ==", "Yg=="]}


def test_a_base64_shaded_option_is_decrypted_before_validation(tmp_path):
    clear = str(tmp_path / "out")
    text = _job("base64", base64.b64encode(clear.encode()).decode())
    config = load_job_text(text)
    assert _sink_path(config) == clear
    # The block as written (stored; its fingerprint reads it as plan/source_identity does) keeps the ciphertext.
    assert config.sinks[0].block["path"] != clear


def test_a_value_that_does_not_decrypt_names_the_option_and_the_plugin(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_job_text(_job("base64", "/not base64!"), source_name="job.conf")
    message = str(err.value)
    assert "in sink[0] LocalFile, line 9 of job.conf" in message and "option 'path' does not decrypt" in message
    assert "/encrypt-config" in message


def test_an_unknown_identifier_is_refused_with_the_known_ones():
    with pytest.raises(ConfigError) as err:
        load_job_text(_job("rot13", "x"))
    assert "shade.identifier 'rot13' is not known: use one of default, base64, aes256" in str(err.value)


def test_a_covered_option_that_is_not_a_string_is_refused():
    tree = {"env": {"shade.identifier": "base64"}, "source": [{"plugin_name": "Jdbc", "password": 1234}]}
    with pytest.raises(ShadeError, match=r"source\[0\] Jdbc: option 'password' .* is not a string"):
        encrypt_config(tree)


def test_aes256_round_trip_and_the_same_value_encrypts_the_same(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_FILE_ENV, _key_file(tmp_path))
    tree = {**SEATUNNEL_EXAMPLE, "env": {"shade.identifier": "aes256"}}
    first, second = encrypt_config(tree), encrypt_config(tree)
    password = first["source"][0]["password"]
    assert password != "seatunnel_password" and len(base64.b64decode(password)) == 12 + 18 + 16
    assert first == second      # a re-encrypted job keeps its pipeline fingerprint
    assert decrypt_config(first) == tree


def test_aes256_is_decrypted_only_where_the_job_runs(tmp_path, monkeypatch):
    key = _key_file(tmp_path)
    clear = str(tmp_path / "out")
    monkeypatch.setenv(KEY_FILE_ENV, key)
    shaded = encrypt_config({"env": {"shade.identifier": "aes256", "shade.options": ["path"]},
                             "sink": [{"plugin_name": "LocalFile", "path": clear}]})["sink"][0]["path"]
    text = _job("aes256", shaded)
    running = load_job_text(text)
    assert _sink_path(running) == clear
    monkeypatch.delenv(KEY_FILE_ENV)
    checked = load_job_text(text, runs_here=False)      # a coordinator validating a submission: no key
    assert _sink_path(checked) == shaded
    assert checked.sinks[0].block == running.sinks[0].block     # what is stored, fingerprinted alike
    with pytest.raises(ConfigError) as err:
        load_job_text(text)
    assert "needs its key to decrypt: set env shade.key-file or SEATIDE_SHADE_KEY_FILE" in str(err.value)


def test_aes256_with_another_key_or_an_altered_value_is_refused(tmp_path):
    mine, theirs = _key_file(tmp_path, "mine"), _key_file(tmp_path, "theirs", bytes(32))
    env = {"shade.identifier": "aes256", "shade.options": ["path"], "shade.key-file": mine}
    shaded = encrypt_config({"env": env, "sink": [{"plugin_name": "LocalFile", "path": "/tmp/x"}]})["sink"][0]["path"]
    with pytest.raises(ConfigError) as err:
        load_job_text(_job("aes256", shaded, f'shade.key-file = "{theirs}"'))
    assert "sink[0] LocalFile" in str(err.value) and "does not decrypt with the aes256 key (sha256 " in str(err.value)
    raw = bytearray(base64.b64decode(shaded))
    raw[15] ^= 1
    altered = base64.b64encode(bytes(raw)).decode()
    with pytest.raises(ConfigError, match="encrypted with another key, or altered"):
        load_job_text(_job("aes256", altered, f'shade.key-file = "{mine}"'))
    with pytest.raises(ConfigError, match="option 'path' does not decrypt"):   # not even well formed
        load_job_text(_job("aes256", "c2hvcnQ=", ""), runs_here=False)


def test_aes256_key_file_errors_say_how_to_fix_them(tmp_path):
    missing = str(tmp_path / "nope")
    with pytest.raises(ConfigError, match=f"the aes256 key file {missing} cannot be read"):
        load_job_text(_job("aes256", "x", f'shade.key-file = "{missing}"'))
    short = tmp_path / "short"
    short.write_text("abcd")
    with pytest.raises(ConfigError, match="does not hold a 32-byte key .* head -c 32 /dev/urandom"):
        load_job_text(_job("aes256", "x", f'shade.key-file = "{short}"'))
    hex_key = tmp_path / "hex"
    hex_key.write_text(bytes(range(32)).hex() + "\n")
    assert json.dumps(encrypt_config({"env": {"shade.identifier": "aes256", "shade.key-file": str(hex_key)},
                                      "source": [{"plugin_name": "Jdbc", "password": "p"}]}))


@pytest.mark.parametrize("tree", [{"env": [None]}, {"env": 3}, ["env"]])
def test_a_config_or_env_that_is_not_an_object_is_refused_not_crashed_on(tree):
    # Found by schemathesis: POST /encrypt-config {"env": [null]} answered 500.
    for change in (encrypt_config, decrypt_config):
        with pytest.raises(ShadeError, match="object"):
            change(tree)
