"""What every ``seatide`` command shares: exit codes, the data directory, ``-i`` variables,
reading a job file, and printing config warnings.

Its own module so that ``cli/main.py`` (the parser) and the commands it dispatches to
import it, not each other.
"""

from __future__ import annotations

import os
import sys

EXIT_OK, EXIT_FAILED, EXIT_BAD_CONFIG, EXIT_INTERRUPTED = 0, 1, 2, 130


class CommandRefused(Exception):
    """A command that cannot go on; ``str()`` is the message, ``code`` the exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED):
        super().__init__(message)
        self.code = code


def run_command_line(prog: str, command) -> int:
    """Run ``command()`` for its exit code: a refusal is its message on stderr (the reason, then
    where, as ``config.job.ConfigError`` lays it out) and its code, Ctrl-C 130."""
    try:
        return command()
    except CommandRefused as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def default_data_dir() -> str:
    return os.environ.get("SEATIDE_DATA_DIR") or os.path.join(os.path.expanduser("~"), ".seatide")


def parse_variables(pairs: list[str] | None) -> dict[str, str]:
    from seatide.config.job_environment import name_refusal

    variables = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise CommandRefused(f"-i expects name=value, got '{pair}'", EXIT_BAD_CONFIG)
        why = name_refusal([name.strip()])      # $-names are the environment's recorded with a job
        if why:
            raise CommandRefused(f"-i: {why}", EXIT_BAD_CONFIG)
        variables[name.strip()] = value
    return variables


def read_job_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise CommandRefused(f"cannot read the job file: {exc.strerror or exc}\n  {path}", EXIT_BAD_CONFIG) from None
    except UnicodeDecodeError as exc:
        raise CommandRefused(f"the job file is not UTF-8 text ({exc.reason} at byte {exc.start})\n  {path}",
                             EXIT_BAD_CONFIG) from None


def print_config_warnings(warnings) -> None:
    """Unknown keys a lenient load ignored, on stderr: each its reason, then where."""
    for warning in warnings:
        print(f"seatide: warning: {warning}", file=sys.stderr)
