"""The README is the front door: short, with the two commands and a job that is valid as printed."""

from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readme() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        return handle.read()


def test_the_readme_is_short_and_keeps_the_two_commands():
    text = _readme()
    assert len(text.splitlines()) <= 120
    assert "bash scripts/setup && .venv/bin/seatide run examples/batch_fake_to_console.conf" in text
    assert "\nbash scripts/test\n" in text
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as handle:
        assert "bash scripts/test" in handle.read()       # CI runs the README's test command


def test_the_readmes_example_job_is_valid(tmp_path):
    job = re.search(r"```hocon\n(.*?)```", _readme(), re.S).group(1)
    path = tmp_path / "job.conf"
    path.write_text(job)
    done = subprocess.run([sys.executable, "-m", "seatide.cli.main", "check", str(path), "-i", "db_password=x"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "source[0] Postgres-CDC" in done.stdout and "sink[0] Jdbc" in done.stdout


def test_every_link_of_the_readme_leads_to_a_file():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", _readme()):
        if not target.startswith("http"):
            assert os.path.exists(os.path.join(ROOT, target)), target
