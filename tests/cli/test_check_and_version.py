"""`seatide --version` and `seatide check`, run as a user runs them (real processes, no Spark)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from importlib.metadata import version

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEATIDE = [sys.executable, "-m", "seatide.cli.main"]

# Two pipelines (connected components), a transform, a checkpointed BATCH env and one
# unknown key (a warning unless strict); ${rows} comes from -i.
TWO_PIPELINES = """env {
  job.name = "two-pipelines"
  job.mode = BATCH
  checkpoint.interval = 2000
  micro-batch.max-rows = 500
}
source {
  FakeSource {
    plugin_output = "a"
    row.num = ${rows}
    schema = { fields { id = bigint } }
  }
  FakeSource {
    plugin_output = "b"
    row.num = 5
    schema = { fields { id = bigint } }
  }
}
transform {
  Sql {
    plugin_input = "a"
    plugin_output = "a2"
    query = "select id from a"
  }
}
sink {
  Console { plugin_input = "a2" }
  Console {
    plugin_input = "b"
    colour = "red"
  }
}
"""


def seatide(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*SEATIDE, *args], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env=dict(os.environ, **(env or {})))


def _job(tmp_path, text: str = TWO_PIPELINES) -> str:
    path = tmp_path / "job.conf"
    path.write_text(text)
    return str(path)


def test_version_is_one_line_naming_seatide_pyspark_and_python():
    result = seatide("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (f"seatide {version('seatide')} (PySpark {version('pyspark')}, "
                             f"Python {platform.python_version()})\n")


def test_check_prints_each_pipeline_with_plugin_lines_links_mode_and_warnings(tmp_path):
    data_dir = tmp_path / "never-made"
    result = seatide("check", _job(tmp_path), "-i", "rows=10", env={"SEATIDE_DATA_DIR": str(data_dir)})
    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines()
    assert out[0].endswith("job.conf: valid")
    assert "BATCH" in out[1] and "a checkpoint every 2000 ms" in out[1] and "at most 500 rows" in out[1]
    assert out[2].startswith("  2 pipelines")
    first, second = out.index(next(l for l in out if l.startswith("pipeline 1"))), \
        out.index(next(l for l in out if l.startswith("pipeline 2")))
    one, two = out[first + 1:second], out[second + 1:second + 3]
    assert [l.split()[0] for l in one] == ["source[0]", "transform[0]", "sink[0]"]
    assert one[0].split()[2:4] == ["line", "8"] and "<-" not in one[0]
    assert one[1].split()[2:4] == ["line", "20"] and one[1].endswith("<- source[0] FakeSource")
    assert one[2].endswith("<- transform[0] Sql")
    assert [l.split()[0] for l in two] == ["source[1]", "sink[1]"] and two[1].endswith("<- source[1] FakeSource")
    assert out[-3].startswith("1 warning") and out[-2] == "  unknown option 'colour' ignored"
    assert out[-1].startswith("    in sink[1] Console, line 30 of ")
    assert not data_dir.exists(), "check must write nothing"


def test_check_json_is_the_plan_as_data(tmp_path):
    result = seatide("check", _job(tmp_path), "-i", "rows=10", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["valid"] and report["mode"] == "BATCH" and report["jobName"] == "two-pipelines"
    assert report["checkpoint"] == {"enabled": True, "intervalMs": 2000, "timeoutMs": 60000,
                                    "microBatchMaxRows": 500}
    first, second = report["pipelines"]
    assert [s["id"] for s in first["transforms"]] == ["transform[0]"]
    assert first["sinks"][0]["reads"] == ["transform[0]"] and first["sinks"][0]["line"] == 27
    assert second["sources"][0] == {"id": "source[1]", "plugin": "FakeSource", "label": "source[1] FakeSource",
                                    "line": 13, "output": "b", "reads": []}
    assert first["fingerprint"] != second["fingerprint"]
    assert len(report["warnings"]) == 1 and "colour" in report["warnings"][0]


def test_check_of_a_streaming_job_without_checkpoint_interval_states_the_default(tmp_path):
    text = TWO_PIPELINES.replace("job.mode = BATCH", "job.mode = STREAMING").replace(
        "  checkpoint.interval = 2000\n", "")
    report = json.loads(seatide("check", _job(tmp_path, text), "-i", "rows=1", "--json").stdout)
    assert report["checkpoint"]["intervalMs"] == 10000 and report["checkpoint"]["microBatchMaxRows"] is None


def test_check_refuses_an_invalid_job_leading_with_the_reason_then_where_and_exit_2(tmp_path):
    """The reason comes first, so a narrow terminal shows it; the plugin, line and file follow
    on a line of their own (a job file's absolute path can be longer than the terminal)."""
    path = _job(tmp_path, TWO_PIPELINES.replace("Sql {", "Sqll {"))
    assert os.path.isabs(path)
    result = seatide("check", path, "-i", "rows=10")
    assert result.returncode == 2 and result.stdout == ""
    reason, where = result.stderr.splitlines()
    assert reason.startswith("seatide: invalid job: unknown transform plugin 'Sqll'. Did you mean Sql?")
    assert path not in reason
    assert where == f"  in transform[0], line 20 of {path}"
    as_json = json.loads(seatide("check", path, "-i", "rows=10", "--json").stdout)
    assert as_json["valid"] is False and "Sqll" in as_json["error"]


def test_a_job_nested_past_the_limit_is_refused_with_its_line_and_exit_2_not_a_traceback(tmp_path):
    """5,000 nested lists once ended ``check``, ``run`` and the SeaTunnel script in a RecursionError's
    traceback (exit 1); they name the line, the limit and the fix, with exit 2."""
    deep = TWO_PIPELINES.replace("row.num = 5", "x = " + "[" * 5000 + "]" * 5000 + "\n    row.num = 5")
    path = _job(tmp_path, deep)
    line = deep.splitlines().index(next(row for row in deep.splitlines() if row.lstrip().startswith("x = "))) + 1
    for command in (["seatide.cli.main", "check", path], ["seatide.cli.main", "run", path],
                    ["seatide.cli.seatunnel", "--check", "-c", path]):
        result = subprocess.run([sys.executable, "-m", *command, "-i", "rows=1"], capture_output=True, text=True,
                                timeout=120, cwd=ROOT, env=dict(os.environ, SEATIDE_DATA_DIR=str(tmp_path / "data")))
        assert result.returncode == 2, (command, result.stderr[-500:])
        assert "Traceback" not in result.stderr and "more than 100 levels deep" in result.stderr
        assert f"line {line} of {path}" in result.stderr


def test_a_variable_whose_value_breaks_the_parse_is_named_and_its_value_not_shown(tmp_path):
    # A value is written so that it arrives as given (config/pasted_values.py); a list is read as one, and
    # joined to text it does not parse.
    path = _job(tmp_path, TWO_PIPELINES.replace("row.num = ${rows}", "row.num = 1${rows}"))
    result = seatide("check", path, "-i", 'rows=["Cli\\"Pw,7"]')
    assert result.returncode == 2 and "variable rows does not parse here (line 10)" in result.stderr, result.stderr
    assert not any(piece in result.stderr for piece in ("Cli", 'li"', '"Pw', "Pw,", "w,7"))


def test_check_needs_the_variables_and_strict_makes_warnings_errors(tmp_path):
    path = _job(tmp_path)
    missing = seatide("check", path)
    assert missing.returncode == 2 and "${rows} is not defined: define it in the file, or set rows in the environment" in missing.stderr
    strict = seatide("check", path, "-i", "rows=10", "--strict")
    assert strict.returncode == 2 and "colour" in strict.stderr and "sink[1] Console" in strict.stderr
    unreadable = seatide("check", str(tmp_path / "nope.conf"))
    assert unreadable.returncode == 2 and "cannot read the job file" in unreadable.stderr


def test_check_refuses_overlapping_save_mode_targets_with_the_reason_and_exit_2(tmp_path):
    """plan/shared_targets.py's refusal (outside review 8, H) reaches the user as a config error:
    the reason naming both sinks and the way on, exit 2, no traceback."""
    out = tmp_path / "out"
    text = f"""env {{ job.mode = BATCH }}
source {{
  FakeSource {{ plugin_output = "a", row.num = 3, schema = {{ fields {{ id = bigint }} }} }}
  FakeSource {{ plugin_output = "b", row.num = 3, schema = {{ fields {{ id = bigint }} }} }}
}}
sink {{
  LocalFile {{ plugin_input = "a", path = "{out}", file_format_type = "json", data_save_mode = "DROP_DATA" }}
  LocalFile {{ plugin_input = "b", path = "{out}/b", file_format_type = "json" }}
}}
"""
    result = seatide("check", _job(tmp_path, text))
    assert result.returncode == 2 and result.stdout == "", (result.returncode, result.stdout)
    assert "Traceback" not in result.stderr, result.stderr
    reason, where = result.stderr.splitlines()
    assert reason.startswith("seatide: invalid job: sink[0] LocalFile") and "sink[1] LocalFile" in reason, reason
    assert "write paths apart" in reason and where.startswith("  in sink[1] LocalFile, line 8 of "), where
