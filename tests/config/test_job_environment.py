"""What a job file takes from an environment: only where the submitting command reads it (job_environment.py);
every reader of a recorded job resolves it from its text and variables alone."""

from __future__ import annotations

import pytest

from seatide.config.job_environment import as_variable, environment_variables, with_environment
from seatide.config.job_text import read_job_text
from seatide.config.loader import ConfigError, load_job_text
from seatide.secrets import mask_message, secret_values

JOB = """
env { job.mode = BATCH, job.name = "nightly-"${API_TOKEN} }
source {
  FakeSource {
    schema = { fields { id = bigint } }
    plugin_output = ${TABLE}
    row.num = ${?ROWS}
    comment = "${QUOTED} stays as written"
    parallelism = ${defined}
  }
}
sink { Console { plugin_input = ${TABLE} } }
defined = 2
"""


def test_a_recorded_job_is_never_filled_in_from_the_readers_environment(monkeypatch):
    monkeypatch.setenv("API_TOKEN", "Tk-reader-env-8812")
    monkeypatch.setenv("TABLE", "t")
    text = JOB.replace("defined = 2\n", "").replace("${defined}", "2")
    with pytest.raises(ConfigError) as refused:
        load_job_text(text, {})
    assert "${API_TOKEN} is not defined: pass -i API_TOKEN=VALUE" in str(refused.value)
    assert '"variables" in a REST submit' in str(refused.value)
    assert read_job_text(text, {"API_TOKEN": "x", "TABLE": "t"}).tree["env"]["job"]["name"] == "nightly-x"


def test_the_submitter_sends_what_the_file_takes_from_its_environment():
    environ = {"API_TOKEN": "Tk-8812", "TABLE": "orders", "ROWS": "7", "QUOTED": "q", "defined": "no", "OTHER": "o"}
    taken = environment_variables(JOB, {}, environ)
    # Not a name the file defines (defined), nor one only inside a quoted string (QUOTED), nor one it never names
    assert taken == {"API_TOKEN": "Tk-8812", "TABLE": "orders", "ROWS": "7"}
    assert environment_variables(JOB, {"API_TOKEN": "given"}, environ).keys() == {"TABLE", "ROWS"}
    variables = with_environment(JOB, {"API_TOKEN": "given"}, environ)
    assert variables["API_TOKEN"] == "given"            # -i wins
    block = read_job_text(JOB, variables).tree["source"]
    assert [b["row"]["num"] for b in block.values()] == [7]     # ${?ROWS} filled in as a variable
    without = read_job_text(JOB, with_environment(JOB, {}, {"API_TOKEN": "x", "TABLE": "t"})).tree["source"]
    assert [b.get("row", {}).get("num") for b in without.values()] == [None]   # and left unset where the environment has none


@pytest.mark.parametrize("value", ["p#ss//word \"q\" {x}", "true", "null", "", "007", "two words", "line\nbreak",
                                   "ünï-cødé", "${NOT_A_REFERENCE}", "a,b"])
def test_a_value_from_the_environment_reads_back_as_the_same_string(value):
    text = 'env { job.mode = BATCH, job.name = ${NAME} }\nsource { FakeSource { schema = { fields { id = bigint } } } }\n' \
           'sink { Console {} }'
    variables = with_environment(text, {}, {"NAME": value})
    assert variables == {"NAME": as_variable(value)}
    assert str(read_job_text(text, variables).tree["env"]["job"]["name"]) == value


def test_a_credential_named_or_declared_secret_value_from_the_environment_is_a_secret_variable():
    text = JOB.replace("job.mode = BATCH", "job.mode = BATCH, secret.variables = [TABLE]")
    environ = {"API_TOKEN": "Tk-8812 #x", "TABLE": "orders-7731", "ROWS": "7"}
    variables = with_environment(text, {}, environ)
    secrets = secret_values(text, variables)
    assert {"Tk-8812 #x", "orders-7731"} <= secrets and "7" not in secrets
    name = read_job_text(text, variables).tree["env"]["job"]["name"]
    assert mask_message(f"job {name} wrote orders-7731", secrets) == "job nightly-****** wrote ******"


def test_a_job_recorded_before_is_masked_with_the_credential_named_values_of_this_environment(monkeypatch):
    """A coordinator filled such a job in from its own environment before: its name holds that value."""
    monkeypatch.setenv("API_TOKEN", "Tk-coordinator-8812")
    monkeypatch.setenv("TABLE", "not-a-credential")
    secrets = secret_values(JOB, {})
    assert "Tk-coordinator-8812" in secrets and "not-a-credential" not in secrets
    assert "Tk-coordinator-8812" not in secret_values(JOB, {"API_TOKEN": "given-one"})


def test_a_row_type_written_as_text_is_not_filled_in_from_the_readers_environment(monkeypatch):
    """A schema's row type written as a string is HOCON parsed again (plugin/types.py): its ``${HOST_NAME}`` was
    read from the coordinator's environment, and the refusal quoted the value ("unknown type 'leaky-...'")."""
    monkeypatch.setenv("HOST_NAME", "leaky-host-7731")
    text = ('env { job.mode = BATCH }\nsource { FakeSource { schema = { fields { r = "{a = ${HOST_NAME}}" } } } }\n'
            'sink { Console {} }')
    with pytest.raises(ConfigError) as refused:
        load_job_text(text, {})
    assert "leaky-host-7731" not in str(refused.value) and "field 'r'" in str(refused.value)
