"""Which options hold secrets, and masking them in messages, log lines and config text."""

from __future__ import annotations

import json
import logging

import pytest

from seatide.secrets import MASK, MaskingFilter, is_secret_key, mask_config_text, mask_message, secret_values
from tests.security.doc_options import DOCS, documented_option_names

PASSWORD = "S3cret-Jdbc-Pass-9"
TENANT = "ACME-tenant-7731"

JOB = f"""
# the operator's comment stays
env {{
  job.mode = BATCH
  secret.variables = [tenant]
}}
source {{
  Jdbc {{
    url = "jdbc:postgresql://127.0.0.1:5432/db_${{tenant}}?user=u&password=InUrl-Pass-1"
    driver = "org.postgresql.Driver"
    user = postgres
    password = "{PASSWORD}"
    query = "select 1 as id"
  }}
  FakeSource {{ schema {{ fields {{ password = string }} }} }}
}}
sink {{
  Jdbc {{ url = "jdbc:postgresql://u:InUserinfo-2@h/db", password = ${{pw}}, "fs.s3a.secret.key" = abc,
         access_key = "ab", partition_key = id }}
}}
"""
VARIABLES = {"tenant": TENANT, "pw": "From-Variable-3", "db_password": "Named-Like-One-4", "region": "eu-west-1"}


def test_every_credential_named_option_in_seatunnels_docs_is_secret_and_no_other():
    names = documented_option_names()
    assert len(names) > 500        # the docs were read
    assert {n for n in names if is_secret_key(n)} == {
        "password", "auth", "token", "fs.s3a.access.key", "fs.s3a.secret.key", "fs.oss.accessKeySecret"}
    # The look-alikes in those docs stay readable: columns, rules, providers, ids, paths.
    for name in ("primary_keys", "primary_key_columns", "constraint_key_name", "UNIQUE_KEY", "INDEX_KEY",
                 "chunk-key.even-distribution.factor.lower-bound", "fs.oss.accessKeyId",
                 "fs.s3a.aws.credentials.provider", "kerberosKeytabFilePath"):
        assert name in names and not is_secret_key(name), name


@pytest.mark.parametrize("name", ["password", "passwd", "db_password", "api_token", "client_secret",
                                  "access_key", "secret_key", "private_key", "api_key", "accessKeySecret",
                                  "credential", "ssl.key.password", "auth", "sasl.jaas.config", "PGPASSWORD",
                                  "accesstoken", "Authorization", "headers.Authorization", "Proxy-Authorization",
                                  "cookie", "Set-Cookie", "X-Api-Key", "X-APIKEY", "apikey", "x-auth-token",
                                  "passWord", "userPassWord", "PassPhrase"])
def test_credential_names_are_secret(name):
    assert is_secret_key(name)


@pytest.mark.parametrize("name", ["key", "partition_key", "sort_key", "key_column", "primary_key", "primary_keys",
                                  "rowkey_column", "hash_key_parse_mode", "password_file", "secret_name",
                                  "auth_type", "secret.variables", "token_url", "ssl.key.location", "keytab",
                                  "primarykey", "rowkey", "cookie_name", "X-Trace"])
def test_names_that_merely_mention_a_secret_are_not(name):
    assert not is_secret_key(name)


def test_secret_values_are_the_credential_options_and_the_secret_variables():
    values = secret_values(JOB, VARIABLES)
    assert {PASSWORD, TENANT, "From-Variable-3", "Named-Like-One-4", "InUrl-Pass-1", "InUserinfo-2", "abc",
            "ab"} <= values
    assert "eu-west-1" not in values and "string" not in values and "id" not in values and "tenant" not in values


def test_config_text_keeps_its_layout_and_masks_every_secret():
    shown = mask_config_text(JOB, VARIABLES)
    for secret in (PASSWORD, "InUrl-Pass-1", "InUserinfo-2", TENANT):
        assert secret not in shown
    assert f'password = "{MASK}"' in shown and f'"fs.s3a.secret.key" = {MASK}' in shown
    assert f'access_key = "{MASK}"' in shown
    assert "# the operator's comment stays" in shown
    assert "password = ${pw}" in shown                    # a reference shows no value
    assert "password = string" in shown                   # a column's type, not a credential
    assert "partition_key = id" in shown and "secret.variables = [tenant]" in shown


def test_a_file_that_starts_with_a_bom_is_masked_exactly_with_its_lines_right():
    """A BOM (Windows editors write one) is skipped by the reader, not cut off the text: offsets
    are the text's own, so the masked value is exactly the password (once: ``password =******s``)."""
    from seatide.config.job_text import JobTextError, read_job_text

    text = "\ufeff" + ('env {\n  job.mode = BATCH\n}\nsource {\n  Jdbc {\n    password = Bom-Pass-9x\n'
                       '    url = "jdbc:postgresql://db/x"\n  }\n}\nsink { Console {} }\n')
    assert mask_config_text(text, {}) == text.replace("Bom-Pass-9x", MASK)
    quoted = text.replace("Bom-Pass-9x", '"Bom-Pass-9x"')
    assert mask_config_text(quoted, {}) == quoted.replace("Bom-Pass-9x", MASK)
    parsed = read_job_text(text)
    assert parsed.keys[("source[0]", "password")] == 6 and parsed.sites[("source", 0)].line == 5
    with pytest.raises(JobTextError) as caught:
        read_job_text(text.replace('db/x"', 'db/x'))       # its quote never closed
    assert caught.value.line == 7


def test_config_text_that_does_not_parse_is_masked_line_by_line():
    shown = mask_config_text('source { Jdbc { password = "Broken-Pass-5", url = "x" ', {})
    assert "Broken-Pass-5" not in shown and f'password = "{MASK}"' in shown


def test_messages_lose_secret_values_url_passwords_and_password_pairs():
    values = secret_values(JOB, VARIABLES)
    message = (f'FATAL: database "db_{TENANT}" does not exist; url jdbc:postgresql://x:Other-6@h/db?password=q7&u=1;'
               f" password={PASSWORD} 'token': 'zz-8' duplicate key: 5")
    masked = mask_message(message, values)
    for secret in (TENANT, "Other-6", "q7", PASSWORD, "zz-8"):
        assert secret not in masked
    assert "duplicate key: 5" in masked and 'database "db_' in masked


def test_log_lines_and_their_tracebacks_are_masked(caplog):
    logger = logging.getLogger("seatide.test.masking")
    handler = logging.StreamHandler()
    lines = []
    handler.emit = lambda record: lines.append(logging.Formatter().format(record))
    handler.addFilter(MaskingFilter({PASSWORD}))
    logger.addHandler(handler)
    try:
        logger.error("connect failed with %s", PASSWORD)
        try:
            raise RuntimeError(f"driver said {PASSWORD}")
        except RuntimeError:
            logger.exception("attempt failed")
    finally:
        logger.removeHandler(handler)
    assert len(lines) == 2 and all(PASSWORD not in line for line in lines)
    assert MASK in lines[0] and "RuntimeError: driver said ******" in lines[1]


@pytest.mark.parametrize("text", ["env = 5", "[1, 2]", "", "a = ${missing}", "env { secret.variables = 3 }"])
def test_odd_configs_mask_without_failing(text):
    assert secret_values(text, {"db_password": "Odd-Pass-6"}) == {"Odd-Pass-6"}
    assert "Odd-Pass-6" not in mask_config_text(text + " Odd-Pass-6", {"db_password": "Odd-Pass-6"})


# The way SeaTunnel's own PostgreSQL jobs are written: the password is an ordinary word that
# also names the user, the database, tables, files and columns.
COMMON_WORD_JOB = """
env { job.mode = BATCH }
source {
  Jdbc {
    url = "jdbc:postgresql://postgres:postgres@pg-host:5432/postgres?password=postgres&user=postgres"
    user = "postgres"
    password = "postgres"
    query = "select * from postgres_cdc_table_1"
    table_path = "postgres.public.postgres_cdc_table_1"
  }
}
sink { LocalFile { path = "/var/lib/postgres/out", file_name_expression = "postgrescdc_to_postgres" } }
"""


def test_a_common_word_password_is_masked_as_a_value_never_inside_names_or_paths():
    values = secret_values(COMMON_WORD_JOB, {})
    assert "postgres" in values
    shown = mask_config_text(COMMON_WORD_JOB, {})
    assert f'password = "{MASK}"' in shown
    assert f"jdbc:postgresql://postgres:{MASK}@pg-host:5432/postgres?password={MASK}&user=postgres" in shown
    for kept in ('user = "postgres"', '"select * from postgres_cdc_table_1"', '"postgres.public.postgres_cdc_table_1"',
                 '"/var/lib/postgres/out"', '"postgrescdc_to_postgres"'):
        assert kept in shown, kept
    message = ("failed to read postgres.public.postgres_cdc_table_1 into /var/lib/postgres/out with "
               "postgrescdc_to_postgres.conf (url jdbc:postgresql://postgres:postgres@h/db); password=postgres, "
               "the password was 'postgres'")
    masked = mask_message(message, values)
    assert masked == ("failed to read postgres.public.postgres_cdc_table_1 into /var/lib/postgres/out with "
                      f"postgrescdc_to_postgres.conf (url jdbc:postgresql://postgres:{MASK}@h/db); password={MASK}, "
                      f"the password was '{MASK}'")


def test_a_distinctive_secret_is_masked_wherever_it_shows_even_inside_a_name():
    """A value with digits or signs cannot turn up inside a name by chance: a database name
    built from a secret variable (db_${tenant}) is masked."""
    masked = mask_message(f'database "db_{TENANT}" does not exist; file /data/{TENANT}.csv', {TENANT})
    assert TENANT not in masked and 'database "db_******"' in masked


@pytest.mark.parametrize("text, secret", [
    ('password = "two Words-1"', "Words-1"),                           # the whole quoted value, not its first word
    ('"password": "a, Comma-2"', "Comma-2"),
    ('password: "Esc\\"aped-3" next', "aped-3"),                      # an escaped quote inside it
    ('sent {\\"token\\": \\"Json-In-Json-4\\"}', "Json-In-Json-4"),   # JSON inside a JSON text
    ('{"why": "password=Inner-5"}', "Inner-5"),             # a pair inside another key's value
    ('credentials: {"user": "u", "password": "x, Nested-6"}', "Nested-6"),
    ("PGPASSWORD=Env-7 psql -c 'SELECT 1'", "Env-7"),
    ("key file -----BEGIN RSA PRIVATE KEY-----\nPem-8\n-----END RSA PRIVATE KEY----- read", "Pem-8"),
    ('password = "cut short, Cut-9', "Cut-9"),                          # never closed: to the end of its line
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nPgp-10\n-----END PGP PRIVATE KEY BLOCK-----", "Pgp-10"),    # review 7
])
def test_a_credential_named_keys_whole_value_is_masked_with_no_secret_known(text, secret):
    """Review 6, F2: what a forgotten job's events show, with no config to take its secrets from."""
    masked = mask_message(text, frozenset())
    assert secret not in masked and MASK in masked, masked


def test_what_names_no_credential_stays_readable():
    text = ('duplicate key: 5; user = "postgres"; password: ""; token_url=http://h/t; '
            "Map(user -> u, x -> 2); slot 'left_slot' retains 10 GiB")
    assert mask_message(text, frozenset()) == text


def test_an_event_details_keys_are_masked_as_its_values_are():
    """Review 7, F4: the detail's JSON is read and masked value by value (mask_tree); its keys were left as
    written, where a key names a table after a secret tenant or a URL with its password. Two keys masked alike
    are both kept."""
    from seatide.secrets import mask_tree
    from seatide.store.event_masking import event_detail

    detail = {"tables": {"db_ACME-7731.orders": 3, "db_ACME-7731.items": 4, "db_BETA-0042.orders": 5},
              "by_url": {"jdbc:postgresql://app:Pw-Old-1@db/x": "failed"}, "options": {"password=Pw-2": 1}}
    secrets = frozenset({"ACME-7731", "BETA-0042"})
    masked = event_detail(json.dumps(detail), secrets)
    assert masked == mask_tree(detail, secrets)
    assert masked["tables"] == {"db_******.orders": 3, "db_******.items": 4, "db_******.orders (2)": 5}, masked
    assert masked["by_url"] == {"jdbc:postgresql://app:******@db/x": "failed"}, masked
    assert "Pw-2" not in json.dumps(masked), masked


HTTP_JOB = """env { job.mode = BATCH }
source { Http {
  url = "https://api.example.com/v1/orders", method = "POST", format = "json"
  headers = { Authorization = "Bearer eyJ-Bearer-1", "Proxy-Authorization" = "Basic UHJveHktMg==",
              Cookie = "theme=dark; sid=Sid-Cookie-3", "X-Api-Key" = "Api-Key-4", "X-Trace" = "trace-5" }
  params = { access_token = "Access-Token-6", apikey = "Apikey-7", page = "1" }
  body = "{\\"api_key\\": \\"Body-Key-8\\", \\"order\\": \\"o-9\\"}"
  schema = { fields { id = bigint } } } }
sink { Console {} }
"""
HTTP_SECRETS = ["eyJ-Bearer-1", "UHJveHktMg==", "Sid-Cookie-3", "Api-Key-4", "Access-Token-6", "Apikey-7", "Body-Key-8"]


def test_an_http_sources_credential_headers_params_and_body_are_secret():
    """Review 7, F6: ``Authorization`` was no credential's name, so an Http source's ``headers = { Authorization =
    "Bearer ..." }`` was shown in clear in the job's config text, and its value was no secret of the job (not
    masked in messages, events, driver logs). The HTTP headers that carry credentials are, whatever their case;
    a credential-named pair inside another option's text (the request body) is a secret value too."""
    values = secret_values(HTTP_JOB)
    assert set(HTTP_SECRETS) <= values and "eyJ-Bearer-1" in values        # the token alone too: it shows alone
    assert not {"trace-5", "o-9", "1"} & values, values       # a cookie's every value is one: "dark" too
    shown = mask_config_text(HTTP_JOB)
    assert [secret for secret in HTTP_SECRETS if secret in shown] == [], shown
    assert '"X-Trace" = "trace-5"' in shown and 'page = "1"' in shown and "o-9" in shown, shown
    line = "POST /v1/orders sent with bearer eyJ-Bearer-1 and key Api-Key-4 refused"
    assert mask_message(line, values) == "POST /v1/orders sent with bearer ****** and key ****** refused"


@pytest.mark.parametrize("text, secret", [
    ("GET /v1 Authorization: Bearer Tok-1 Accept: */*", "Tok-1"),
    ("Proxy-Authorization=Basic dXNlcjpQdy0y", "dXNlcjpQdy0y"),
    ("authorization: token Tok-3", "Tok-3"),
    ("headers Map(Cookie -> theme=dark; sid=Sid-4, X-Trace -> 1)", "Sid-4"),
    ("Set-Cookie: sid=Sid-5; Path=/; HttpOnly", "Sid-5"),
    ('{"x-api-key": "Key-6", "X-Auth-Token": "Tok-7"}', "Key-6"),
    ("X-APIKEY: Key-8", "Key-8"),
])
def test_credential_headers_in_a_message_are_masked_with_no_secret_known(text, secret):
    masked = mask_message(text, frozenset())
    assert secret not in masked and MASK in masked, masked
    assert "X-Trace -> 1" in masked or "X-Trace" not in text, masked


def test_the_http_connectors_documented_example_keeps_its_token_masked():
    """SeaTunnel's Http sink documents ``headers`` as a map of any header, with a ``token`` in its example."""
    with open(f"{DOCS}/connector-v2/sink/Http.md", encoding="utf-8") as handle:
        doc = handle.read()
    start = doc.index("Http {", doc.index("## Example"))
    example = doc[start:doc.index("```", start)]
    job = f"env {{ job.mode = BATCH }}\nsource {{ FakeSource {{ schema = {{ fields {{ id = bigint }} }} }} }}\n" \
          f"sink {{ {example} }}"
    assert "9e32e859ef044462a257e1fc76730066" in example
    assert "9e32e859ef044462a257e1fc76730066" not in mask_config_text(job)
    assert "9e32e859ef044462a257e1fc76730066" in secret_values(job)
