"""What a job file takes from an environment: only where the submitting command reads it (job_environment.py);
every reader of a recorded job resolves it from its text and variables alone."""

from __future__ import annotations

import pytest

from seatide.config.job_environment import environment_variables, with_environment
from seatide.config.job_text import JobTextError, read_job_text
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
    # Not a name the file defines (defined), nor one it never names (OTHER); one only inside a quoted string
    # (QUOTED) is, since the pre-pass fills an -i one in there too
    assert taken == {"API_TOKEN": "Tk-8812", "TABLE": "orders", "ROWS": "7", "QUOTED": "q"}
    assert environment_variables(JOB, {"API_TOKEN": "given"}, environ).keys() == {"TABLE", "ROWS", "QUOTED"}
    variables = with_environment(JOB, {"API_TOKEN": "given"}, environ)
    assert variables["API_TOKEN"] == "given"            # -i wins
    block = read_job_text(JOB, variables).tree["source"]
    assert [b["row"]["num"] for b in block.values()] == [7]     # ${?ROWS} filled in as a variable
    without = read_job_text(JOB, with_environment(JOB, {}, {"API_TOKEN": "x", "TABLE": "t"})).tree["source"]
    assert [b.get("row", {}).get("num") for b in without.values()] == [None]   # and left unset where the environment has none


ONE_VALUE = """env { job.mode = BATCH, job.name = "run-${NAME}" }
source { FakeSource { schema = { fields { id = bigint } }, plugin_output = t } }
transform { Sql { plugin_input = t, plugin_output = u, query = \"\"\"select id, '${NAME}' as tag from t\"\"\" } }
sink { LocalFile { plugin_input = u, path = "/tmp/out/${NAME}/part", file_format_type = json } }
"""


def _filled(variables):
    try:
        tree = read_job_text(ONE_VALUE, variables).tree
    except JobTextError as exc:
        return f"refused: {exc.reason}"
    return (tree["env"]["job"]["name"], [b["query"] for b in tree["transform"].values()],
            [b["path"] for b in tree["sink"].values()])


@pytest.mark.parametrize("value", ["nightly#7", "v 1", "a//b", 'say "hi"', "true", "", "007", "line\nbreak",
                                   "ünï-cødé", "a,b", "p#ss//word {x}"])
def test_a_value_from_the_environment_is_filled_in_as_the_same_i_value(value):
    """``RUN_ID='nightly#7'`` from the environment was sent quoted and pasted with its quotes: the path was
    ``/tmp/out/"nightly#7"/part`` and the SQL held the quotes, where ``-i RUN_ID=nightly#7`` gives
    ``/tmp/out/nightly#7/part``: one job, whichever way its value came."""
    variables = with_environment(ONE_VALUE, {}, {"NAME": value})
    assert variables == {"NAME": value}
    assert _filled(variables) == _filled({"NAME": value})
    if value == "nightly#7":
        assert _filled(variables)[2] == ["/tmp/out/nightly#7/part"]
        assert _filled(variables)[1] == ["select id, 'nightly#7' as tag from t"]


def test_a_name_only_inside_quotes_is_taken_from_the_environment():
    """examples/paimon_to_console.conf's ``warehouse = "file://${warehouse}"``: the pre-pass fills a given one in
    there, so the environment's is taken as ``-i`` would give it (one in a comment is not)."""
    with open("examples/paimon_to_console.conf", encoding="utf-8") as handle:
        text = handle.read()
    variables = with_environment(text, {}, {"warehouse": "/data/wh"})
    assert variables == {"warehouse": "/data/wh"}
    assert [b["warehouse"] for b in read_job_text(text, variables).tree["source"].values()] == ["file:///data/wh"]
    commented = "# ${HOME_ONLY}\n" + text
    assert "HOME_ONLY" not in with_environment(commented, {}, {"warehouse": "w", "HOME_ONLY": "h"})


def test_an_i_value_naming_a_variable_the_environment_gives_is_filled_in():
    """``-i 'JOBNAME=${USER_TAG}'`` with USER_TAG in the environment worked when HOCON read the environment."""
    text = "env { job.mode = BATCH, job.name = ${JOBNAME}, tag = \"t-${JOBNAME}\" }\n" \
           "source { FakeSource { schema = { fields { id = bigint } } } }\nsink { Console {} }"
    variables = with_environment(text, {"JOBNAME": "${USER_TAG}"}, {"USER_TAG": "u-7"})
    assert variables == {"JOBNAME": "${USER_TAG}", "USER_TAG": "u-7"}
    env = read_job_text(text, variables).tree["env"]
    assert (env["job"]["name"], env["tag"]) == ("u-7", "t-u-7")
    looped = read_job_text(text.replace("${JOBNAME}, tag", "x, tag"), {"JOBNAME": "a${JOBNAME}"}).tree["env"]
    assert looped["tag"] == "t-a${JOBNAME}"      # a value naming itself is left as written


def test_a_credential_named_or_declared_secret_value_from_the_environment_is_a_secret_variable():
    text = JOB.replace("job.mode = BATCH", "job.mode = BATCH, secret.variables = [TABLE]")
    environ = {"API_TOKEN": "Tk 8812-x", "TABLE": "orders-7731", "ROWS": "7"}
    variables = with_environment(text, {}, environ)
    secrets = secret_values(text, variables)
    assert {"Tk 8812-x", "orders-7731"} <= secrets and "7" not in secrets
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
