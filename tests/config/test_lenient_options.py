"""Unknown option keys: warnings by default (as SeaTunnel ignores them), errors under strict mode.

The job below is written as a SeaTunnel user writes one: typos, a key from another engine,
a key from another SeaTunnel version. It must run; each unknown key gets one warning that
names the file, the key's line, the plugin and the closest known option.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from seatide.cli.main import main
from seatide.config.job import ConfigError
from seatide.config.loader import load_job_file, load_job_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SEATUNNEL_JOB = """\
env {
  parallelism = 1
  job.mode = "BATCH"
  execution.planner = blink
  checkpoint.intervall = 5000
}

source {
  FakeSource {
    plugin_output = "fake"
    row.num = 4
    rownum = 100
    schema = {
      fields {
        id = bigint
        name = string
      }
    }
    string.lenght = 3
  }
}

transform {
  Sql {
    plugin_input = "fake"
    plugin_output = "out"
    query = "select id, name from fake"
    querry_timeout = 10
  }
}

sink {
  Assert {
    plugin_input = "out"
    rules {
      row_rules = [{ rule_type = MAX_ROW, rule_value = 4 }, { rule_type = MIN_ROW, rule_value = 4 }]
    }
    common-options = "from another version"
  }
}
"""

# (plugin, line, key, closest option or None) for every unknown key above, in file order.
EXPECTED = [
    ("env", 4, "execution.planner", "print.execution.plan"),
    ("env", 5, "checkpoint.intervall", "checkpoint.interval"),
    ("source[0] FakeSource", 12, "rownum", "row.num"),
    ("source[0] FakeSource", 19, "string.lenght", "string.length"),
    ("transform[0] Sql", 28, "querry_timeout", None),
    ("sink[0] Assert", 38, "common-options", None),
]


@pytest.fixture
def job_file(tmp_path):
    path = tmp_path / "seatunnel_job.conf"
    path.write_text(SEATUNNEL_JOB)
    return str(path)


def test_unknown_keys_are_warnings_naming_file_line_plugin_and_closest_option(job_file):
    config = load_job_file(job_file)
    got = [(w.plugin, w.line, w.unknown.key, w.unknown.closest) for w in config.warnings]
    assert got == EXPECTED
    text = str(config.warnings[1])
    assert text == ("unknown option 'checkpoint.intervall' ignored (did you mean 'checkpoint.interval'?)\n"
                    f"  in env, line 5 of {job_file}")
    # the known options still take effect; the unknown ones change nothing
    assert config.env.checkpoint_interval_ms is None
    assert config.sources[0].plugin.opts["row.num"] == 4


def test_json_job_files_warn_with_the_plugin_when_no_line_is_known():
    text = ('{"env": {"job.mode": "BATCH", "jobname": "x"}, "source": [{"plugin_name": "FakeSource", '
            '"schema": {"fields": {"id": "bigint"}}, "row_num": 3}], "sink": [{"plugin_name": "Console"}]}')
    config = load_job_text(text, source_name="job.json")
    assert [(w.plugin, w.unknown.key, w.unknown.closest) for w in config.warnings] == [
        ("env", "jobname", "job.name"), ("source[0] FakeSource", "row_num", "row.num")]
    assert str(config.warnings[0]).startswith("unknown option 'jobname' ignored (did you mean 'job.name'?)\n"
                                              "  in env, line 1 of job.json")


def test_wrong_values_and_missing_options_stay_errors_in_lenient_mode():
    with pytest.raises(ConfigError, match=r"option 'row.num' must be integer.*\n  in source\[0\] FakeSource, line 3 "):
        load_job_text("env {}\nsource { FakeSource {\n row.num = lots\n schema { fields { id = int } } } }\n"
                      "sink { Console {} }")
    with pytest.raises(ConfigError, match="required option 'path' is missing"):
        load_job_text("source { LocalFile { file_format_type = csv } }\nsink { Console {} }")


def test_strict_flag_refuses_the_first_unknown_key_with_exit_2(job_file, tmp_path, capsys):
    code = main(["run", job_file, "--strict", "--data-dir", str(tmp_path / "d")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 2, err    # one message (reason, then where), no traceback
    assert err.startswith("seatide: invalid job: unknown option 'execution.planner'")
    assert f"\n  in env, line 4 of {job_file}\n" in err


def test_strict_in_env_refuses_unknown_plugin_keys(job_file, tmp_path, capsys):
    text = SEATUNNEL_JOB.replace("  execution.planner = blink\n  checkpoint.intervall = 5000\n",
                                 "  strict = true\n")
    path = tmp_path / "strict.conf"
    path.write_text(text)
    code = main(["run", str(path), "--data-dir", str(tmp_path / "d")])
    err = capsys.readouterr().err
    assert code == 2
    assert "unknown option 'rownum'; did you mean 'row.num'?" in err and "in source[0] FakeSource, line 11 of" in err
    assert not (tmp_path / "d").exists() or not os.listdir(tmp_path / "d")   # nothing was submitted


def test_strict_submit_refuses_and_lenient_submit_warns(job_file, tmp_path, capsys):
    data = str(tmp_path / "d")
    assert main(["submit", job_file, "--strict", "--data-dir", data]) == 2
    assert "unknown option 'execution.planner'" in capsys.readouterr().err
    assert main(["submit", job_file, "--data-dir", data, "--job-id", "lenient-1"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "lenient-1"
    assert err.count("seatide: warning:") == len(EXPECTED)
    assert f"unknown option 'common-options' ignored\n  in sink[0] Assert, line 38 of {job_file}" in err


@pytest.mark.cluster    # `seatide run`: a real driver
def test_seatide_run_runs_the_job_and_prints_each_warning(job_file, tmp_path):
    result = subprocess.run([sys.executable, "-m", "seatide.cli.main", "run", job_file,
                             "--data-dir", str(tmp_path / "d")],
                            capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    warnings = [(line, lines[i + 1]) for i, line in enumerate(lines) if line.startswith("seatide: warning:")]
    assert len(warnings) == len(EXPECTED), result.stderr[-3000:]
    for (plugin, line, key, closest), (reason, where) in zip(EXPECTED, warnings):
        assert reason.startswith(f"seatide: warning: unknown option '{key}' ignored")
        assert where == f"  in {plugin}, line {line} of {job_file}"
        assert (f"did you mean '{closest}'?" in reason) == bool(closest)
    assert "FINISHED" in result.stdout


NESTED_JOB = """\
env { job.mode = BATCH }
source {
  FakeSource {
    plugin_output = fake
    schema = { columns = [{ name = id, type = bigint, comennt = "the key" }] }
    rows = [{ kind = INSERT, fields = [1], feilds = [2] }]
  }
}
transform {
  JsonPath {
    plugin_input = fake
    plugin_output = out
    columns = [{ src_field = id, path = "$.a", dest_field = a, dest_typ = int }]
  }
}
sink {
  Assert {
    plugin_input = out
    rules {
      row_rules = [{ rule_type = MIN_ROW, rule_value = 1, rule_valeu = 2 }]
      field_rules = [{
        field_name = id
        field_valu = [{ rule_type = NOT_NULL }]
      }]
      catalog_table_rule { column_rule = [{ name = id, type = bigint, nulable = false }] }
    }
  }
}
"""

NESTED_EXPECTED = [
    ("source[0] FakeSource", 5, "schema.columns[0].comennt", "comment"),
    ("source[0] FakeSource", 6, "rows[0].feilds", "fields"),
    ("transform[0] JsonPath", 13, "columns[0].dest_typ", "dest_type"),
    ("sink[0] Assert", 20, "rules.row_rules[0].rule_valeu", "rule_value"),
    ("sink[0] Assert", 23, "rules.field_rules[0].field_valu", "field_value"),
    ("sink[0] Assert", 25, "rules.catalog_table_rule.column_rule[0].nulable", "nullable"),
]


def test_unknown_keys_inside_nested_blocks_are_warnings_with_their_line_and_closest_key():
    """SeaTunnel ignores a typo inside a rule, a column or a row as it does at the top."""
    config = load_job_text(NESTED_JOB, source_name="nested.conf")
    got = [(w.plugin, w.line, w.unknown.key, w.unknown.closest) for w in config.warnings]
    assert got == NESTED_EXPECTED
    assert str(config.warnings[4]) == ("unknown option 'rules.field_rules[0].field_valu' ignored (did you mean "
                                       "'field_value'?)\n  in sink[0] Assert, line 23 of nested.conf")
    # the rest of each block still counts
    column = config.sources[0].plugin.declared_schema().columns[0]
    assert (column.name, column.data_type.simpleString()) == ("id", "bigint")
    rules = config.sinks[0].plugin.rules
    assert (rules.row_rules[0].rule_type, rules.field_rules[0].field_name) == ("MIN_ROW", "id")


def test_strict_refuses_the_first_unknown_nested_key_naming_its_line():
    with pytest.raises(ConfigError) as info:
        load_job_text(NESTED_JOB, source_name="nested.conf", strict=True)
    assert info.value.line == 5
    assert str(info.value).startswith("unknown key 'schema.columns[0].comennt'; did you mean 'comment'?")
    assert str(info.value).endswith("\n  in source[0] FakeSource, line 5 of nested.conf")
