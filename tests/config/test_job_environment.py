"""A job's ``${NAME}`` falls back to the environment its submitter recorded, never to the environment of the
process that happens to parse it (config/job_environment.py): the representation, the capture (every name the
file falls back to, outside review F3 of the lost first attempt), and the parse of a marked and an unmarked row."""

from __future__ import annotations

import pytest

from seatide.config.job import ConfigError
from seatide.config.job_environment import MARK, marked, name_refusal, split
from seatide.config.job_text import JobTextError, captured_environment, read_job_text, substitution_names
from seatide.config.loader import load_job_text, parse_job_tree
from seatide.plugin.types import SchemaError, parse_type
from seatide.secrets import mask_config_text, secret_values

SHELL = {"HOME": "/home/op", "TENANT": "acme", "REGION": "eu-1", "LATE": "after-the-error", "OPT": "optional",
         "UNUSED": "never-named"}


def test_marked_variables_split_back_into_the_users_and_the_environment():
    stored = marked({"tenant": "acme"}, {"HOME": "/home/op", "A.B": "dotted"})
    assert stored[MARK] and stored["$env.HOME"] == "/home/op"
    assert split(stored) == ({"tenant": "acme"}, {"HOME": "/home/op", "A.B": "dotted"})
    assert split(marked({}, {})) == ({}, {})                        # recorded, and empty: a REST submit's
    assert split({"tenant": "acme"}) == ({"tenant": "acme"}, None)  # a row stored before: no environment recorded


@pytest.mark.parametrize("name", ["$x", "$env", "$env.HOME", "", "  "])
def test_a_variable_name_seatide_keeps_or_an_empty_one_is_refused(name):
    why = name_refusal([name])
    assert why and ("'$'" in why or "empty" in why), why


def test_the_capture_takes_each_name_the_file_falls_back_to_and_no_other():
    text = """
    env { job.name = "n-"${TENANT} }
    source { FakeSource { plugin_output = ${?OPT}, row.num = 3, schema = { fields { id = bigint } } } }
    sink { LocalFile { path = ${HOME}"/out/"${tenant}"/"${?NOT_SET}"/"${defined.here}, file_format_type = json } }
    defined { here = x }
    """
    captured = captured_environment(text, {"tenant": "given"}, SHELL)
    # tenant is a -i variable, defined.here a path of the file, NOT_SET unset in the shell, UNUSED never named
    assert captured == {"HOME": "/home/op", "OPT": "optional", "TENANT": "acme"}


def test_names_after_an_undefined_one_are_captured_too():
    text = 'a = ${MISSING}\nb = ${LATE}\nc = { d = ${?REGION} }\n'
    assert captured_environment(text, {}, SHELL) == {"LATE": "after-the-error", "REGION": "eu-1"}


def test_names_after_an_error_that_is_not_an_undefined_name_are_captured_too():
    # the lost attempt pasted "_" for undefined names and stopped at the first other error (review F3)
    text = 'a = ${TENANT} { x = 1 }\nb = ${LATE}\nc = [${?OPT}]\n'
    assert captured_environment(text, {}, SHELL) == {"TENANT": "acme", "LATE": "after-the-error", "OPT": "optional"}


def test_every_one_of_many_names_is_captured():
    # the lost attempt gave up after 64 rounds
    shell = {f"V{i}": str(i) for i in range(100)}
    text = "\n".join(f"k{i} = ${{{'?' if i % 2 else ''}V{i}}}" for i in range(100)) + "\nz = ${MISSING}\n"
    assert captured_environment(text, {}, shell) == shell


def test_a_text_that_does_not_tokenize_captures_nothing():
    assert captured_environment('a = "never closed\nb = ${TENANT}', {}, SHELL) == {}
    assert substitution_names('a = ${x}\nb = ${?y.z}', {"x": "1"}, True) == {"y.z"}


def test_a_marked_row_reads_only_its_recorded_environment(monkeypatch):
    monkeypatch.setenv("SEATIDE_TEST_COORD_ONLY", "coordinator-value")
    text = 'a = ${SEATIDE_TEST_COORD_ONLY}\n'
    with pytest.raises(JobTextError) as refused:
        read_job_text(text, marked({}, {}))
    assert refused.value.undefined == "SEATIDE_TEST_COORD_ONLY"
    assert read_job_text(text, marked({}, {"SEATIDE_TEST_COORD_ONLY": "submitter"})).tree == {"a": "submitter"}
    assert read_job_text('a = ${?SEATIDE_TEST_COORD_ONLY}\nb = 1\n', marked({}, {})).tree == {"b": 1}


def test_an_unmarked_row_reads_the_process_environment_as_it_always_did(monkeypatch):
    monkeypatch.setenv("SEATIDE_TEST_OLD_ROW", "process-value")
    assert read_job_text("a = ${SEATIDE_TEST_OLD_ROW}\n", {"tenant": "x"}).tree == {"a": "process-value"}


def test_a_recorded_value_is_filled_in_as_given_never_read_again_as_hocon():
    value = 'a,#"}\\ b\n${HOME} c'
    text = 'env { job.mode = BATCH, job.name = ${ODD} }\nsource { FakeSource { schema = { fields { id = bigint } } } }\n' \
           'sink { Console {} }\n'
    assert parse_job_tree(text, marked({}, {"ODD": value}))["env"]["job"]["name"] == value
    assert captured_environment(text, {}, {"ODD": value, "HOME": "/home/op"}) == {"ODD": value}


def test_an_undefined_name_of_a_marked_row_says_where_environment_variables_come_from():
    text = 'env { job.mode = BATCH }\nsource { FakeSource { row.num = ${ROWS}, schema = { fields { id = bigint } } } }\n' \
           'sink { Console {} }\n'
    with pytest.raises(ConfigError) as refused:
        load_job_text(text, marked({}, {}))
    message = str(refused.value)
    assert "${ROWS} is not defined" in message and "set ROWS in the environment of the seatide command" in message
    assert "give it in a REST request's \"environment\" field" in message and "=VALUE" not in message, message
    assert "or with -i (a REST request's \"variables\")" in message and "plain value" not in message, message
    assert "environment of the seatide command that submits the job" in message, message


def test_recorded_values_are_secrets_whatever_the_text_calls_secret():
    text = 'env { job.mode = BATCH, job.name = "nightly-"${TENANT} }\n# for ACME-7731 only\n' \
           'source { FakeSource { schema = { fields { id = bigint } } } }\nsink { Console {} }\n'
    stored = marked({}, {"TENANT": "ACME-7731"})
    assert "ACME-7731" in secret_values(text, stored)
    assert "ACME-7731" in secret_values("not { a job", stored)       # a text that does not parse: still secret
    assert "ACME-7731" not in mask_config_text(text, stored)


def test_a_row_type_reads_no_environment(monkeypatch):
    monkeypatch.setenv("SEATIDE_TEST_TYPE", "coordinator-secret")
    with pytest.raises(SchemaError) as refused:
        parse_type("{a = ${SEATIDE_TEST_TYPE}}")
    assert "coordinator-secret" not in str(refused.value)
    assert "not defined" in str(refused.value)


def test_the_not_defined_advice_survives_masking_for_a_credential_like_name():
    """``-i COORD_SECRET=VALUE`` was shown ``-i COORD_SECRET=******``: the masker takes a credential-like name's
    ``=`` for a pair (outside review L2); the advice names the variable without one."""
    from seatide.secrets import mask_refusal, secret_values

    text = 'env { job.mode = BATCH, job.name = ${COORD_SECRET} }\nsource { FakeSource {} }\nsink { Console {} }\n'
    with pytest.raises(ConfigError) as refused:
        load_job_text(text, marked({}, {}))
    shown = mask_refusal(str(refused.value), secret_values(text, marked({}, {})))
    assert "set COORD_SECRET in the environment of the seatide command" in shown and "******" not in shown, shown
