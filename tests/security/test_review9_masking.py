"""Review 9: a secret the masker missed (a warm-driver misfit in the worker's log, a secret variable filled from its
default) and ordinary text it masked (a digits-only password inside other numbers; ``false``, ``english`` taken
for secrets from a query's text and a cookie's parts)."""

from __future__ import annotations

import logging
import sys
import types

import pytest

from seatide.config.loader import load_job_env, spark_conf_for
from seatide import intents
from tests.store.test_store import store  # noqa: F401  (a fixture)
from seatide.secrets import MASK, is_secret_key, mask_config_text, mask_message, secret_values
from seatide.worker.agent import Worker
from seatide.worker.driver_log import LOG_MASKING

S3_SECRET, S3_ACCESS = "wJalrXUtnFEMI-K7MDENG-bPxRfiCY", "AKIAEXAMPLE7777"
S3_JOB = '''
env { job.mode = BATCH, "spark.hadoop.fs.s3a.access.key" = "%s", "spark.hadoop.fs.s3a.secret.key" = "%s"
      "spark.hadoop.fs.s3a.endpoint" = "http://minio-%s:9000" }
source { FakeSource { plugin_output = t, row.num = 1, schema { fields { a = int } } } }
sink { Console { plugin_input = t } }
'''


class _Pool:
    size = 1

    def take(self, *args):
        raise AssertionError("a misfit never takes a warm driver")


@pytest.mark.parametrize("held", [False, True])
def test_a_warm_driver_misfit_never_shows_a_setting_s_secret_in_the_worker_log(caplog, held):
    """The reason a job goes cold names its first differing Spark setting; a credential's value is masked by its
    name, and the running attempt's secrets (held by the worker's log filter) wherever a line shows them."""
    config = S3_JOB % (S3_ACCESS, S3_SECRET, "Tn9q-7731")
    worker = types.SimpleNamespace(warm_pool=_Pool(), spark_conf={}, node_id="w-review9")
    attempt = types.SimpleNamespace(job_id="j1", attempt_id=1)
    if held:
        LOG_MASKING.hold(("w-review9", 1), secret_values(config, {}) | {"Tn9q-7731"})
    try:
        with caplog.at_level(logging.INFO, logger="seatide.worker"):
            assert Worker._hand_to_warm_driver(worker, attempt, spark_conf_for(load_job_env(config, {})), None) is None
            logging.getLogger("seatide.worker.agent").info("endpoint http://minio-Tn9q-7731:9000 token=abc-99")
    finally:
        LOG_MASKING.drop(("w-review9", 1))
    shown = caplog.text
    assert "cold driver: spark.hadoop.fs.s3a.access.key is" in shown
    assert S3_ACCESS not in shown and S3_SECRET not in shown
    assert "abc-99" not in shown                       # a credential-named pair: masked with no job held
    assert ("Tn9q-7731" in shown) is not held          # a job's own secret: while its attempt runs


DEFAULTED = '''
env { job.mode = BATCH, job.name = "nightly-${tenant:ACME-9931}", secret.variables = [tenant] }
source { FakeSource { plugin_output = "rows_${tenant:ACME-9931}", row.num = 1, schema { fields { a = int } } } }
sink { LocalFile { path = "/out/${tenant:ACME-9931}/${db_password:Zr7-default}", file_format_type = "json" } }
'''


def test_a_secret_variable_filled_from_its_default_is_secret():
    secrets = secret_values(DEFAULTED, {})
    assert {"ACME-9931", "Zr7-default"} <= secrets
    assert mask_message("FileNotFoundError: /out/ACME-9931/part-0.json", secrets) == \
        f"FileNotFoundError: /out/{MASK}/part-0.json"
    given = secret_values(DEFAULTED, {"tenant": "GIVEN-4411"})      # a given value is the one the job runs with
    assert "GIVEN-4411" in given and "ACME-9931" not in given


DIGITS = '''
source { Jdbc { url = "jdbc:mysql://db:3306/shop", user = root, password = "123456", plugin_output = t
  query = "select * from orders where id > 1234567 and ts > 1712345678" } }
sink { LocalFile { plugin_input = t, path = "/data/2024/123456789", file_format_type = json } }
'''


def test_a_digits_only_password_is_masked_as_a_whole_token_only():
    secrets = secret_values(DIGITS, {})
    for line in ["Job 0 finished: 1234567 rows", "91234567 bytes", '{"logOffset": 1234560, "ts": 1712345678123}',
                 "order 123456a7", "v1234566"]:
        assert mask_message(line, secrets) == line
    for leak in ["key=123456 next", "jdbc:mysql://root:123456@db/shop", '{"password":"123456"}', "pw 123456.",
                 "login root/123456 failed", "secret 123456"]:
        assert "123456" not in mask_message(leak, secrets), leak
    text = mask_config_text(DIGITS, {})
    assert "1234567 and ts > 1712345678" in text and "/data/2024/123456789" in text and '"123456"' not in text


PLAIN = '''
source { Jdbc { url = "jdbc:postgresql://db:5432/app", user = app, password = "Xk9-long-pass", plugin_output = users
  query = "select id from users where password_expired = false and token_revoked = 'false' and password_hint = hint" } }
sink { Http { plugin_input = users, url = "https://api.example.com/in"
  headers { Cookie = "sid=Zq81-abcd; consent=true; lang=english" }
  body = "token=Tq7-body-token&mode=true" } }
'''


def test_flags_and_words_inside_a_query_or_a_cookie_are_not_secrets():
    secrets = secret_values(PLAIN, {})
    assert not {"false", "true", "english", "hint"} & secrets
    assert {"Xk9-long-pass", "Zq81-abcd", "Tq7-body-token"} <= secrets
    for line in ["root\n |-- id: long (nullable = false)", "spark.ui.enabled=false, adaptive=true",
                 "pipeline 1 idle: false; waiting for english locale"]:
        assert mask_message(line, secrets) == line


@pytest.mark.parametrize("name", ["fs.azure.account.key.acme.dfs.core.windows.net",
                                  "spark.hadoop.fs.azure.account.key.acme.blob.core.windows.net",
                                  "fs.azure.sas.landing.acme.blob.core.windows.net", "passwords", "smtp_pass",
                                  "db_pw", "mail_pwd"])
def test_a_credential_named_before_its_host_or_in_short_is_secret(name):
    assert is_secret_key(name)


@pytest.mark.parametrize("name", ["fs.azure.account.auth.type.acme.dfs.core.windows.net",
                                  "fs.azure.account.oauth2.client.id.acme.dfs.core.windows.net", "pass", "bypass"])
def test_a_setting_about_a_host_s_credential_is_not(name):
    assert not is_secret_key(name)


def test_no_declared_connector_option_becomes_secret_by_a_short_name():
    """Every option a plugin declares: only those that hold a credential are secret (the short forms and the host
    rule added none)."""
    names = {name for option in _declared_options() for name in option.names()}
    assert len(names) > 150
    assert {n for n in names if is_secret_key(n)} == {"password", "auth"}


def _declared_options():
    """Every ``Option`` a loaded SeaTide module holds, alone or in a tuple (a plugin's options)."""
    from seatide.plugin.options import Option
    from seatide.plugin.registry import load_builtin_plugins

    load_builtin_plugins()
    for name, module in list(sys.modules.items()):
        if name.startswith("seatide."):
            for value in vars(module).values():
                held = value if isinstance(value, (tuple, list)) else (value,)
                yield from (o for o in held if isinstance(o, Option))


AZURE = '''
source { Jdbc { url = "jdbc:postgresql://db:5432/app"   # was: password=Old-Pa55word!
  user = app, password = "New-Pa55word!", query = "select 1" // token: Old-Tok3n-77
  plugin_output = t } }
sink { Hive { plugin_input = t, table_name = "db.t", metastore_uri = "thrift://hms:9083"
  hive.hadoop.conf = { "fs.azure.account.key.acme.dfs.core.windows.net" = "QXp1cmVLZXktQUNNRQ==" }
  hive.hadoop.conf2 { fs.azure.account.key.beta.dfs.core.windows.net = "QmV0YUtleS1CRVRB" } } }
'''


def test_an_azure_account_key_and_an_end_of_line_comment_are_masked_in_the_config_text():
    text = mask_config_text(AZURE, {})
    for secret in ("Old-Pa55word!", "New-Pa55word!", "Old-Tok3n-77", "QXp1cmVLZXktQUNNRQ==", "QmV0YUtleS1CRVRB"):
        assert secret not in text, secret
    assert '"jdbc:postgresql://db:5432/app"   # was: password=' in text and 'query = "select 1" // token:' in text


@pytest.mark.parametrize("written, quoted", [("  password Hunter2-Xq9\n", "the key 'password ******'"),
                                             ("  password = {Hunter2-Xq9 = 1}\n", "must be string, got ******")])
def test_a_refusal_never_quotes_a_credential_s_value(written, quoted):
    head = 'env { job.mode = BATCH }\nsink { Console {} }\nsource { Jdbc { url = "jdbc:postgresql://h/db", ' \
           'driver = "org.postgresql.Driver", query = "select 1"\n'
    with pytest.raises(intents.Refusal) as refused:
        intents.check(head + written + "} }", {}, source="job.conf")
    assert "Hunter2-Xq9" not in str(refused.value) and quoted in str(refused.value)


REFERRED = '''
env { job.mode = BATCH }
%s
source { Jdbc { url = "jdbc:postgresql://h/db", driver = "org.postgresql.Driver", user = app, query = "select 1"
  %s } }
sink { Console {} }
'''


@pytest.mark.parametrize("defined, option", [
    ('creds { pg = ${vault.pg} }\nvault { pg = "letmein" }', "password = ${creds.pg}"),           # a chain
    ('"creds" { "pg" = "letmein" }', 'password = ${"creds"."pg"}'),                                # a quoted path
    ('vault { pg = "letmein" }', 'password = "v2-"${vault.pg}'),                                     # a prefix
    ('vault { pg = "letmein" }', 'password = ${vault.pg}"#2"')])                                     # a suffix
def test_what_a_credential_refers_to_is_masked_in_the_config_text(defined, option):
    text = mask_config_text(REFERRED % (defined, option), {})
    assert "letmein" not in text and "v2-" not in text and '"#2"' not in text
    assert "${" in text and "user = app" in text     # the references themselves stay readable


TENANT_JOB = '''
env { job.mode = BATCH, job.name = "nightly-${tenant}", secret.variables = [tenant] }
source { FakeSource { plugin_output = "rows_${tenant}", row.num = 1, schema { fields { a = int } } } }
sink { Console { plugin_input = "rows_${tenant}" } }
'''


@pytest.mark.parametrize("as_json", [False, True])
def test_seatide_check_shows_a_job_made_of_a_secret_variable_masked(tmp_path, capsys, as_json):
    from seatide.cli.check import check_job

    path = tmp_path / "job.conf"
    path.write_text(TENANT_JOB)
    assert check_job(str(path), {"tenant": "ACME-7731"}, as_json=as_json) == 0
    shown = capsys.readouterr().out
    assert "ACME-7731" not in shown and f"nightly-{MASK}" in shown


def test_a_retained_slot_s_warning_is_logged_masked(store, tmp_path, caplog):
    """The leader's log line for a source holding more than the warning: the slot's name may be made of a secret
    variable (here its default's)."""
    from sqlalchemy import select

    from seatide.coordinator.source_watch import Measured, record_measurements
    from seatide.store import schema as s
    from tests.leader import elected
    from tests.store.test_store import submit

    text = 'env { secret.variables = [tenant] }\nsource { LocalFile { path = "/tmp/${tenant:ACME-7731}", ' \
           'file_format_type = "parquet" } }\nsink { Console {} }\n'
    submit(store, tmp_path, text=text)
    with store.read() as conn:
        job = conn.execute(select(s.jobs).where(s.jobs.c.job_id == "j1")).one()
    with caplog.at_level(logging.WARNING, logger="seatide.coordinator.source_watch"):
        raised = record_measurements(store, elected(store).epoch, "coordinator:c1", job, [Measured(
            1, "source[0]", "Postgres-CDC", "seatide_ACME-7731_source0", 5000, state="reserved")], warn_bytes=1000)
    assert len(raised) == 1
    assert f"seatide_{MASK}_source0 (5000 bytes, warning at 1000)" in caplog.text and "ACME-7731" not in caplog.text


def test_a_left_out_slot_s_note_is_logged_masked(store, tmp_path, caplog):
    """A left-out pipeline whose config no longer loads: the release's warning names what it last held, a slot
    named after a secret variable of that config."""
    from sqlalchemy import insert

    from seatide.coordinator.source_release import _left_behind
    from seatide.store import schema as s
    from tests.store.test_store import submit

    text = 'env { secret.variables = [tenant] }\nsource { LocalFile { path = "/tmp/${tenant}", ' \
           'file_format_type = "parquet" } }\nsink { Console {} }\n'
    submit(store, tmp_path, text=text.replace("${tenant}", "in"))
    then = types.SimpleNamespace(config=text, variables='{"tenant": "ACME-7731"}', pipeline_ids=frozenset({1}),
                                 incarnation=1)
    with store.write() as conn:
        conn.execute(insert(s.source_holds).values(job_id="j1", pipeline_id=1, plugin_id="source[0]", incarnation=1,
                                                   connector="Postgres-CDC", holds="seatide_ACME-7731_source0",
                                                   measured_at=0.0))
    with caplog.at_level(logging.WARNING, logger="seatide.coordinator.source_release"), store.write() as conn:
        _left_behind(conn, types.SimpleNamespace(job_id="j1", run_id=None, incarnation=1), then, "no longer loads",
                     "coordinator:c1", None)
    assert f"last seen holding seatide_{MASK}_source0" in caplog.text and "ACME-7731" not in caplog.text
