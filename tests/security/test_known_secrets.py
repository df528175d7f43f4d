"""A job's known secrets masked whole, whatever they hold; and which names hold one (review 8).

The review found a known password holding a separator (``;`` ``,`` ``&`` ``)`` ``@`` a space) masked only up to
it: the ``key=value`` and URL rules ran before the search for known values and cut the value in two. And a
name the Http connector hides (``Ocp-Apim-Subscription-Key``, ``?key=``, ``X-Amz-Signature``) that the masker
did not know, so a job's config text showed what the connector never did.
"""

from __future__ import annotations

import pytest

from seatide.connectors.http.client import is_credential
from seatide.secrets import MASK, LineMasker, MaskingFilter, is_secret_key, mask_config_text, mask_message, \
    secret_values

JDBC = '''
source { Jdbc { url = "jdbc:mysql://db:3306/app", user = "app", password = "%s", query = "select 1" } }
sink { Console {} }
'''


@pytest.mark.parametrize("password", ["x;Kq8vLm2PzR", "Tr0ub4dor&3xyz", "a,Zk9-Long-Secret", "p@ssW0rd-91",
                                      "Ab)cd-4567", "Ab]cd}-4567", "hunter 2 and more"])
@pytest.mark.parametrize("shape", ["password={} rejected", "Map(url -> jdbc:mysql://db/app, password -> {}, user -> a)",
                                   "jdbc:mysql://app:{}@db:3306/app", "--password {}", "password: {}"])
def test_a_known_secret_holding_a_separator_is_masked_whole(password, shape):
    secrets = secret_values(JDBC % password)
    shown = mask_message(shape.format(password), secrets)
    tail = password[len(password) // 2:]
    assert tail not in shown and MASK in shown, shown


def test_a_driver_log_line_and_a_logging_record_mask_a_separated_secret_whole():
    secrets = secret_values(JDBC % "x;Kq8vLm2PzR")
    line = LineMasker(secrets).line("options Map(user -> app, password -> x;Kq8vLm2PzR)\n")
    assert line == f"options Map(user -> app, password -> {MASK})\n"
    import logging
    record = logging.LogRecord("t", logging.ERROR, __file__, 1, "failed: %s", ("password=x;Kq8vLm2PzR",), None)
    MaskingFilter(secrets).filter(record)
    assert record.getMessage() == f"failed: password={MASK}"


def test_config_text_masks_a_known_secret_in_a_url_whole():
    text = JDBC.replace('"jdbc:mysql://db:3306/app"', '"jdbc:mysql://app:p@ss;W0rd-91@db:3306/app"') % "p@ss;W0rd-91"
    shown = mask_config_text(text, {})
    assert "W0rd-91" not in shown and "ss;" not in shown, shown


@pytest.mark.parametrize("name", ["Ocp-Apim-Subscription-Key", "DD-APPLICATION-KEY", "x-functions-key",
                                  "X-Amz-Signature", "ssl.keystore.key", "headers.X-Goog-Api-Key", "params.key"])
def test_what_the_http_connector_hides_the_masker_masks(name):
    assert is_secret_key(name) and is_credential(name)


@pytest.mark.parametrize("name", ["key", "sig", "signature", "session"])
def test_a_bare_key_or_signature_is_a_credential_as_a_request_parameter_only(name):
    from seatide.secrets.names import is_secret_param
    assert is_secret_param(name) and is_credential(name)
    assert not is_secret_key(name)      # Redis' ``key`` option; "duplicate key: 5" in a message


@pytest.mark.parametrize("name", ["primary_key", "key_column", "partition.key", "partition.keys", "keys",
                                  "sink.Redis.key", "sort_key", "hash_key", "UNIQUE_KEY", "rowkey", "SparkSession",
                                  "session.timeout.ms", "idempotency_key", "monkey", "keyboard"])
def test_a_data_key_stays_readable_for_both(name):
    assert not is_secret_key(name) and not is_credential(name)


def test_every_option_a_seatide_connector_declares_keeps_its_reading():
    """No ordinary option becomes a secret: of every option SeaTide declares, only its credentials are."""
    from seatide.plugin import registry
    registry.load_builtin_plugins()
    plugins = [registry.lookup(kind, name) for kind in ("source", "transform", "sink") for name in registry.names(kind)]
    names = {key for plugin in plugins if plugin is not None for opt in plugin.options for key in (opt.key, *opt.aliases)}
    assert len(names) > 200
    assert {n for n in names if is_secret_key(n)} == {"password", "auth"}

def test_an_http_sources_key_headers_and_query_key_are_masked_in_its_config_text():
    job = '''
source { Http {
  url = "https://maps.example.com/api/geocode/json?key=AIzaSyD-EXAMPLEKEY123&sig=Qm9ndXNTaWduYXR1cmU"
  method = "GET"
  format = "json"
  headers { Ocp-Apim-Subscription-Key = "3f2a9c7d5e1b4a8f9c0d", DD-APPLICATION-KEY = "ddapp-0123456789" }
  params { api_version = "2", key = "Param-Key-77" }
} }
sink { Redis { host = "r", key = "user_id", data_type = "key" } }
'''
    shown = mask_config_text(job, {})
    for secret in ("AIzaSyD-EXAMPLEKEY123", "Qm9ndXNTaWduYXR1cmU", "3f2a9c7d5e1b4a8f9c0d", "ddapp-0123456789",
                   "Param-Key-77"):
        assert secret not in shown, secret
    assert 'api_version = "2"' in shown and 'key = "user_id"' in shown


SHADED_PASSWORD = "Kq8v;Lm2-PzR77"


def _shaded_job(identifier: str, key_file: str | None = None) -> str:
    from seatide.config.shade import encrypt_config
    env = {"shade.identifier": identifier, **({"shade.key-file": key_file} if key_file else {})}
    tree = encrypt_config({"env": env, "source": {"Jdbc": {"password": SHADED_PASSWORD}}})
    encoded = tree["source"]["Jdbc"]["password"]
    assert encoded != SHADED_PASSWORD
    written = "\n".join(f'{key} = "{value}"' for key, value in env.items())
    return (f'env {{ {written} }}\n'
            f'source {{ Jdbc {{ url = "jdbc:mysql://db:3306/app", user = "app", password = "{encoded}", '
            f'query = "select 1" }} }}\nsink {{ Console {{}} }}\n')


@pytest.mark.parametrize("identifier", ["base64", "aes256"])
def test_a_shaded_password_is_known_in_clear_as_the_driver_connects_with_it(identifier, tmp_path):
    key_file = tmp_path / "shade.key"
    key_file.write_text("ab" * 32)
    job = _shaded_job(identifier, str(key_file) if identifier == "aes256" else None)
    secrets = secret_values(job)
    for text in (f"asked with password {SHADED_PASSWORD}", f"Map(password -> {SHADED_PASSWORD})",
                 f"b'{SHADED_PASSWORD}'"):
        shown = mask_message(text, secrets)
        assert "PzR77" not in shown and "Kq8v" not in shown, shown
        assert LineMasker(secrets).line(text) == shown


def test_an_aes_shade_without_its_key_is_masked_as_written(tmp_path, monkeypatch):
    key_file = tmp_path / "shade.key"
    key_file.write_text("ab" * 32)
    monkeypatch.setenv("SEATIDE_SHADE_KEY_FILE", str(key_file))
    encoded_with_key = _shaded_job("aes256")
    assert SHADED_PASSWORD in secret_values(encoded_with_key)     # the driver's environment names the key
    monkeypatch.delenv("SEATIDE_SHADE_KEY_FILE")
    assert SHADED_PASSWORD not in secret_values(encoded_with_key)  # a coordinator's has none: nothing fails
    assert "password = " in mask_config_text(encoded_with_key, {})


def test_secret_variables_written_as_one_string_are_read_as_the_option_parser_reads_them():
    job = '''
env { secret.variables = "tenant, region_key" }
source { LocalFile { path = "/data/${tenant}/${region_key}", file_format_type = "parquet" } }
sink { Console {} }
'''
    variables = {"tenant": "ACME-7731", "region_key": "rk-99-secret", "region": "eu-west-1"}
    from seatide.config.env import ENV_OPTIONS
    from seatide.plugin.options import read_options
    assert read_options({"secret.variables": "tenant, region_key"}, ENV_OPTIONS)["secret.variables"] == [
        "tenant", "region_key"]      # the env option parser's reading: two names
    assert {"ACME-7731", "rk-99-secret"} <= secret_values(job, variables)
    assert "eu-west-1" not in secret_values(job, variables)
    shown = mask_config_text(job, variables)
    assert "ACME-7731" not in shown and "rk-99-secret" not in shown


@pytest.mark.parametrize("job, secret, kept", [
    ('source { Jdbc { url = "u", user = "app", password = "${db_pw:changeme}", query = "q" } }', "changeme",
     "${db_pw:"),
    ('creds { pg = "letmein" }\nsource { Jdbc { url = "u", user = "app", password = ${creds.pg}, query = "q" } }',
     "letmein", "password = ${creds.pg}"),
    ('source { Jdbc {\n  url = "u"\n  # password = "Old-Pa55word!"   (rotated)\n  password = "New-Pa55word!"\n'
     '  query = "q"\n} }', "Old-Pa55word!", "(rotated)"),
    ('source { Jdbc {\n  url = "u"\n  // token: ghp_16C7e42F292c6912E7710c8\n  password = "x"\n  query = "q"\n} }',
     "ghp_16C7e42F292c6912E7710c8", "// token:"),
])
def test_config_text_masks_a_default_a_reference_and_a_commented_out_credential(job, secret, kept):
    shown = mask_config_text(job + "\nsink { Console {} }\n", {})
    assert secret not in shown and kept in shown, shown
    assert 'user = "app"' in shown or 'url = "u"' in shown      # ordinary text readable


def test_a_referenced_ordinary_word_is_masked_only_where_the_credential_takes_it():
    job = 'creds { pg = "letmein" }\nsource { Jdbc { url = "u", user = letmein_ro, password = ${creds.pg}, ' \
          'query = "q" } }\nsink { Console {} }\n'
    shown = mask_config_text(job, {})
    assert 'pg = "******"' in shown and "user = letmein_ro" in shown
