"""``seatide run -i name=value``, as a user runs it (a real process, its driver on Spark): the value arrives in the
rows the job writes exactly as given, wherever its ``${name}`` stands (config/pasted_values.py).

Before, the value was pasted into the text as written and read as HOCON: ``#`` and ``//`` cut it (the rest a
comment), a ``"`` or ``\\`` changed or broke the string it stood in, spaces at its ends were dropped and ``${HOME}``
was looked up in the environment."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_captured_environment import cli, shell

ODD = '  ab#x //c "q" \\d} e,f\n${HOME} '
JOB = """
env { job.mode = BATCH }
source {
  FakeSource {
    schema = { fields { id = bigint, v = string, w = string, p = string } }
    rows = [{ kind = INSERT, fields = [${n}, ${v}, "w:${v}:w", /p/${v}/p] }]
  }
}
sink { LocalFile { path = "${out}", file_format_type = json } }
"""


@pytest.mark.cluster
def test_seatide_run_writes_a_variables_value_as_given(tmp_path):
    out = tmp_path / "out dir"
    conf = tmp_path / "job.conf"
    conf.write_text(JOB)
    result = cli("run", str(conf), "-i", f"v={ODD}", "-i", "n=7", "-i", f"out={out}",
                 "--data-dir", str(tmp_path / "d"), env=shell())
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(line) for path in out.rglob("*.json") for line in path.read_text().splitlines() if line]
    assert rows == [{"id": 7, "v": ODD, "w": f"w:{ODD}:w", "p": f"/p/{ODD}/p"}], rows
