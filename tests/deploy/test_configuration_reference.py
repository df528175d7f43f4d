"""deploy/configuration.md names every setting the code reads, so the page stays true.

The lists are read from the code itself: the cluster roles' argparse flags, every
``SEATIDE_*`` name in src/, and the declared job ``env`` options. A new flag, variable or
option without a line in the reference fails here, with the names that are missing.
"""

from __future__ import annotations

import argparse
import os
import re

from seatide.cli.main import build_parser
from seatide.config.env import ENV_OPTIONS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REFERENCE = os.path.join(ROOT, "deploy", "configuration.md")


def _reference() -> str:
    with open(REFERENCE) as handle:
        return handle.read()


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    raise AssertionError(f"no sub-command {name}")


def cluster_flags(role: str) -> set[str]:
    parser = _subparser(_subparser(build_parser(), "cluster"), role)
    return {option for action in parser._actions for option in action.option_strings
            if option.startswith("--") and option != "--help"}


def seatide_env_vars() -> set[str]:
    names = set()
    for root, _, files in os.walk(os.path.join(ROOT, "src", "seatide")):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(root, name)) as handle:
                    names |= set(re.findall(r"\bSEATIDE_[A-Z0-9_]*[A-Z0-9]\b", handle.read()))
    return names


def test_every_coordinator_and_worker_flag_is_documented():
    text = _reference()
    flags = cluster_flags("coordinator") | cluster_flags("worker")
    assert {"--store", "--slots", "--spark-conf", "--port", "--lease-ttl"} <= flags    # the scan sees them
    missing = sorted(f for f in flags if f"`{f}" not in text)
    assert not missing, f"deploy/configuration.md does not document {missing}"


def test_every_seatide_environment_variable_is_documented():
    text = _reference()
    names = seatide_env_vars()
    assert {"SEATIDE_STORE", "SEATIDE_API_TOKEN", "SEATIDE_FAILPOINTS"} <= names          # the scan sees them
    missing = sorted(n for n in names if f"`{n}`" not in text)
    assert not missing, f"deploy/configuration.md does not document {missing}"


def test_every_job_env_option_is_documented():
    text = _reference()
    missing = sorted(o.key for o in ENV_OPTIONS if f"`{o.key}`" not in text)
    assert not missing, f"deploy/configuration.md does not document env options {missing}"


def test_the_systemd_environment_file_sets_only_documented_variables():
    text = _reference()
    with open(os.path.join(ROOT, "deploy", "systemd", "seatide.env")) as handle:
        names = {line.split("=", 1)[0].lstrip("# ").strip() for line in handle
                 if re.match(r"#?\s*[A-Z][A-Z0-9_]*=", line)}
    assert names, "the environment file sets nothing"
    missing = sorted(n for n in names if n.startswith("SEATIDE_") and f"`{n}`" not in text)
    assert not missing, f"deploy/systemd/seatide.env sets undocumented {missing}"
