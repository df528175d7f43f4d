"""The rewrite cache (seatide.testing.rewrite_cache) on real pytest-xdist runs of its own, with
bytecode writing off as in CI: the controller writes each test module's rewritten pyc before
the workers start, the workers load it and rewrite nothing; an edited module is never served its
old pyc; a pytest without the functions it uses gets a one-line note and an ordinary run."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc, _rewrite_test

from tests.inner_pytest import inner_pytest

# The project's conftest records each of its modules pytest rewrites, and in which process: the
# controller ("controller") or a worker (gw0, gw1). It wraps pytest's own function, which the
# import hook (and the rewrite cache) look up when they call it. (Installed pytest plugins'
# modules are rewritten too, each where it is imported: not the project's, not recorded.)
CONFTEST = """
import os
from pathlib import Path
from _pytest.assertion import rewrite

_rewrite_test = rewrite._rewrite_test

def _recorded(fn, config):
    if fn.parent == Path(__file__).parent:
        with open(os.environ["REWRITES_LOG"], "a") as log:
            log.write(os.environ.get("PYTEST_XDIST_WORKER", "controller") + " " + fn.name + "\\n")
    return _rewrite_test(fn, config)

rewrite._rewrite_test = _recorded
{extra}
"""
TEST_A = """
def test_a():
    value = 2
    assert value == 2
"""
TEST_B = """
def test_b():
    assert [1, 2] == [1, 2]
"""


def _project(tmp_path: Path, conftest_extra: str = "") -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "conftest.py").write_text(CONFTEST.format(extra=conftest_extra))
    (project / "test_a.py").write_text(TEST_A)
    (project / "test_b.py").write_text(TEST_B)
    return project


def _run(project: Path, *plugin: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """A two-worker run of the project, bytecode writing off; the run and its rewrites' log."""
    log = project.parent / "rewrites.log"
    log.unlink(missing_ok=True)
    command, env = inner_pytest(*plugin)
    env.update(PYTHONDONTWRITEBYTECODE="1", REWRITES_LOG=str(log))
    run = subprocess.run([*command, "-n", "2", "-q", "--basetemp", str(project.parent / "basetemp")],
                         cwd=project, env=env, capture_output=True, text=True, timeout=300)
    return run, sorted(log.read_text().splitlines()) if log.exists() else []


def _pyc(source: Path) -> Path:
    return source.parent / "__pycache__" / (source.name[:-3] + PYC_TAIL)


def test_the_workers_load_the_pycs_the_controller_wrote_and_rewrite_nothing(tmp_path):
    project = _project(tmp_path)
    # Without the cache, each worker rewrites each test module itself and nothing is written.
    run, rewrites = _run(project)
    assert run.returncode == 0, run.stdout + run.stderr
    assert rewrites == ["gw0 test_a.py", "gw0 test_b.py", "gw1 test_a.py", "gw1 test_b.py"]
    assert not (project / "__pycache__").exists()

    run, rewrites = _run(project, "seatide.testing.rewrite_cache")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout
    assert rewrites == ["controller conftest.py", "controller test_a.py", "controller test_b.py"]
    for name in ("conftest.py", "test_a.py", "test_b.py"):
        source = project / name
        code = _read_pyc(source, _pyc(source))
        assert code is not None, name
        assert code == _rewrite_test(source, None)[1], name     # what the worker would compile

    # The next run finds them up to date: nobody rewrites anything.
    run, rewrites = _run(project, "seatide.testing.rewrite_cache")
    assert run.returncode == 0, run.stdout + run.stderr
    assert rewrites == []


def test_an_edited_module_is_never_served_its_old_pyc(tmp_path):
    project = _project(tmp_path)
    run, _ = _run(project, "seatide.testing.rewrite_cache")
    assert run.returncode == 0, run.stdout + run.stderr
    source = project / "test_a.py"
    old = _pyc(source).read_bytes()
    # The same size and the same mtime: only the content tells the pyc is out of date.
    stat = source.stat()
    source.write_text(TEST_A.replace("value == 2", "value == 3"))
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert source.stat().st_size == stat.st_size and source.stat().st_mtime_ns == stat.st_mtime_ns
    assert _read_pyc(source, _pyc(source)) is None

    # Without the cache: the workers rewrite the edited module (and only it), and run its new code.
    run, rewrites = _run(project)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "assert 2 == 3" in run.stdout
    assert rewrites == ["gw0 test_a.py", "gw1 test_a.py"]

    # With it: the controller rewrites it again, and the workers run the new code from its pyc.
    run, rewrites = _run(project, "seatide.testing.rewrite_cache")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "assert 2 == 3" in run.stdout
    assert rewrites == ["controller test_a.py"]
    assert _pyc(source).read_bytes() != old
    assert _read_pyc(source, _pyc(source)) is not None


def test_a_pytest_without_the_functions_it_uses_runs_as_before_with_a_note(tmp_path):
    project = _project(tmp_path, conftest_extra="del rewrite._write_pyc")
    run, rewrites = _run(project, "seatide.testing.rewrite_cache")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout
    assert [line for line in run.stdout.splitlines() if "rewrite cache" in line] == [
        f"seatide rewrite cache: pytest {pytest.__version__} lacks _write_pyc; test modules are rewritten in each worker"]
    assert rewrites == ["gw0 test_a.py", "gw0 test_b.py", "gw1 test_a.py", "gw1 test_b.py"]
    assert not (project / "__pycache__").exists()
