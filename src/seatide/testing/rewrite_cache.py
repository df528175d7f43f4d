"""A pytest plugin: the test modules' assertion rewriting done once per run, before the
pytest-xdist workers collect, on every core, rather than once in each worker.

pytest imports every test module and conftest through its assertion-rewriting hook, which
parses the module, rewrites its ``assert`` statements and compiles the result: ~65 % of a
collection's CPU here. It keeps the result in ``__pycache__/<name>.<tag>-pytest-<version>.pyc``
only when it may write bytecode, and the suite runs with ``PYTHONDONTWRITEBYTECODE=1`` (CI too):
each of the run's three workers rewrote all ~350 modules itself, ~48 CPU-s of a 2-core machine
at the start of every run, and the ~360 modules of the installed pytest plugins it imports
(schemathesis, hypothesis, ...), which pytest rewrites too, ~8 more. A worker still *reads* such
a pyc when one is there and up to date (``AssertionRewritingHook.exec_module``), so the
controller, before it starts the workers, writes them, in one process a core.

The pycs are pytest's own, made by its own functions (``_rewrite_test``, ``_write_pyc``,
``get_cache_dir``, ``PYC_TAIL``): byte for byte what a worker that may write would have left.
Each carries the hash of its source (PEP 552, checked on every read), so an edited test is
rewritten again by the worker; ``_write_pyc`` writes to a file of its own process and renames it
into place, so a reader sees a whole pyc or none. These are private to pytest: with a pytest
that lacks one, the step is skipped with a one-line note, and the run is as before, only slower.

Only under a pytest-xdist controller: a single pytest process rewrites each module once anyway
(and a targeted ``-n 0`` run would pay for modules it does not collect); a worker or a
``--collect-only`` run has no workers to spare the work.
"""

from __future__ import annotations

import fnmatch
import importlib
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

_NOTE = "seatide rewrite cache: {}; test modules are rewritten in each worker"
# Forks of the controller at most: the cores the scheduler offers may be a large host's, not a
# container's CPU quota.
_MOST_PROCESSES = 4


# What the cache takes from pytest, all private to it: the functions and names its import hook
# uses to rewrite a module and to write and read its pyc (_pytest/assertion/rewrite.py), and the
# pattern match it gives ``python_files`` (_pytest/pathlib.py).
_USED = {"_pytest.assertion.rewrite": ("PYC_TAIL", "_read_pyc", "_rewrite_test", "_write_pyc",
                                       "assertstate_key", "get_cache_dir", "try_makedirs"),
         "_pytest.pathlib": ("fnmatch_ex",)}


def pytests_functions() -> tuple[SimpleNamespace | None, str]:
    """pytest's functions the cache uses, looked up now (not at import: a conftest may wrap one),
    or None and the first one this pytest lacks."""
    found = {}
    for module, names in _USED.items():
        try:
            loaded = importlib.import_module(module)
        except ImportError:
            return None, module
        for name in names:
            if not hasattr(loaded, name):
                return None, name
            found[name] = getattr(loaded, name)
    return SimpleNamespace(**found), ""


def _python_files(folder: Path, keep, skip: list[str]) -> Iterator[Path]:
    """The ``.py`` files under ``folder`` that ``keep(path)`` takes, in the directories whose
    names match none of ``skip`` (nor ``__pycache__``)."""
    for parent, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "__pycache__" and not any(fnmatch.fnmatch(d, p) for p in skip)]
        yield from (Path(parent, name) for name in files if name.endswith(".py") and keep(Path(parent, name)))


def collected_files(config: pytest.Config, parts: SimpleNamespace) -> set[Path]:
    """The test modules and conftests a worker's collection rewrites: under each path pytest
    collects (its arguments, or ``testpaths``), the files matching ``python_files`` and every
    ``conftest.py``, and the conftests of the directories above it, up to the rootdir. A module
    named on the command line is rewritten whatever its name. Not in the directories pytest
    does not enter (``norecursedirs``: dot-directories, ``build``, ``venv``, ...)."""
    patterns, skip = config.getini("python_files"), config.getini("norecursedirs")
    found: set[Path] = set()
    for arg in config.args:
        path = config.invocation_params.dir / arg.split("::")[0]     # as given, or absolute
        for parent in [path, *path.parents]:
            if (parent / "conftest.py").is_file():
                found.add(parent / "conftest.py")
            if parent == config.rootpath:
                break
        if path.is_file():
            found.update([path] if path.suffix == ".py" else [])
        else:
            found.update(_python_files(path, lambda file: file.name == "conftest.py" or any(
                parts.fnmatch_ex(pattern, file) for pattern in patterns), skip))
    return found


def plugin_files(config: pytest.Config, parts: SimpleNamespace) -> set[Path]:
    """The modules of what pytest marked for rewriting: the installed pytest plugins (each
    package whole: schemathesis, hypothesis, anyio, xdist, ...) and the modules ``pytest_plugins``
    names. A worker rewrites each one it imports, ~360 of them, ~2.8 CPU-s; all ~550 cost the
    controller ~2.5 once. (``_must_rewrite`` is private too: without it, none of them.)"""
    found: set[Path] = set()
    hook = config.stash[parts.assertstate_key].hook
    for name in sorted(getattr(hook, "_must_rewrite", ())):
        module = sys.modules.get(name)      # a plugin is imported by now, or was never found
        file = getattr(module, "__file__", None) or ""
        if hasattr(module, "__path__"):
            for folder in module.__path__:
                found.update(_python_files(Path(folder), lambda _: True, []))
        elif file.endswith(".py"):
            found.add(Path(file))
    return found


def shares(files: list[Path], count: int) -> list[list[Path]]:
    """``files`` split into ``count`` shares of about equal work: a module's rewrite and compile
    take time in proportion to its size, so the largest first, each to the lightest share."""
    split: list[list[Path]] = [[] for _ in range(count)]
    weight = [0] * count
    for file in sorted(files, key=lambda f: f.stat().st_size, reverse=True):
        lightest = weight.index(min(weight))
        split[lightest].append(file)
        weight[lightest] += file.stat().st_size
    return split


def _write_share(config: pytest.Config, files: list[Path], parts: SimpleNamespace) -> int:
    """Rewrite each of ``files`` whose pyc is missing or out of date, and write its pyc, as the
    import hook's ``exec_module`` does; the number written. A module that does not parse is
    left to the worker, which reports it."""
    state = config.stash[parts.assertstate_key]
    written = 0
    for file in files:
        cache_dir = parts.get_cache_dir(file)
        pyc = cache_dir / (file.name[:-3] + parts.PYC_TAIL)
        if parts._read_pyc(file, pyc) is not None:      # up to date: what the worker will read
            continue
        try:
            source_hash, code = parts._rewrite_test(file, config)
        except Exception:   # noqa: BLE001 - a syntax error is the worker's to report
            continue
        if parts.try_makedirs(cache_dir) and parts._write_pyc(state, code, source_hash, pyc):
            written += 1
    return written


def precompile(config: pytest.Config, files: list[Path], processes: int, parts: SimpleNamespace) -> int:
    """Write the rewritten pycs of ``files`` in ``processes`` processes: this one and forked
    children (a fork shares the config, whose ini settings the rewriting reads, and needs no
    pickling). The number this process wrote; a child that fails leaves its share to the workers."""
    # A fork copies only the thread that forks: with another one running (none here at session
    # start; a plugin may start one), a lock it holds could never be released in the child.
    if threading.active_count() > 1:
        processes = 1
    mine, *theirs = shares(files, max(1, processes))
    children = []
    for share in theirs:
        pid = os.fork()
        if pid == 0:                            # the child: its share, then out, running no
            code = 1                            # atexit handler and flushing no pytest buffer
            try:
                _write_share(config, share, parts)
                code = 0
            finally:
                os._exit(code)
        children.append(pid)
    try:
        return _write_share(config, mine, parts)
    finally:
        for pid in children:
            os.waitpid(pid, 0)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:      # not Linux
        return os.cpu_count() or 1


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Before pytest-xdist's controller starts its workers (``DSession.pytest_sessionstart``,
    trylast), with every core: nothing else runs yet."""
    config = session.config
    if not config.pluginmanager.has_plugin("dsession") or hasattr(config, "workerinput"):
        return
    if config.getoption("assertmode", "rewrite") != "rewrite" or not hasattr(os, "fork"):
        return
    parts, missing = pytests_functions()
    if parts is None:
        _say(config, f"pytest {pytest.__version__} lacks {missing}")
        return
    # Before 9.2, pytest's pyc names its source by mtime and size alone: a test edited within the
    # same second to the same size would run as it was, which a run that writes nothing never did.
    if tuple(int(p) for p in pytest.__version__.split(".")[:2] if p.isdigit()) < (9, 2):
        _say(config, f"pytest {pytest.__version__} does not check a pyc against its source's hash")
        return
    try:
        files = collected_files(config, parts) | plugin_files(config, parts)
        precompile(config, sorted(files), min(_cores(), _MOST_PROCESSES), parts)
    except Exception as exc:    # noqa: BLE001 - a file gone mid-walk, a changed private function
        _say(config, f"{type(exc).__name__}: {exc}")


def _say(config: pytest.Config, why: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    note = _NOTE.format(why)
    if reporter:
        reporter.write_line(note)
    else:
        sys.stderr.write(note + "\n")
