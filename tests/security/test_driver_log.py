"""A driver's own output reaches its log file masked: print, stderr, and what its child
processes write (the JVM's log4j lines), not only its Python logging."""

from __future__ import annotations

import os
import sys

from seatide.worker.agent import ProcessLauncher
from seatide.worker.driver_log import DriverLog

PASSWORD = "S3cret-Jdbc-Pass-9"

# A stand-in for a driver: Python output, a child process writing to the inherited stderr
# (as the JVM does), and a last line without its newline.
DRIVER = f"""
import subprocess, sys
print('connect with password {PASSWORD} to postgres_cdc_table_1', flush=True)
subprocess.run(['sh', '-c', 'echo WARN url jdbc:postgresql://postgres:postgres@h/postgres as user postgres >&2'])
sys.stdout.write('the end {PASSWORD}')
"""


def _run(tmp_path, inherit_stdout: bool) -> str:
    log = DriverLog(str(tmp_path / "attempt-1.log"), {PASSWORD, "postgres"})
    proc = ProcessLauncher().start([sys.executable, "-c", DRIVER], log, dict(os.environ), inherit_stdout)
    assert proc.wait(timeout=60) == 0
    log.relay.join(timeout=60)           # ends when every holder of the pipe has closed it
    assert not log.relay.is_alive()
    return (tmp_path / "attempt-1.log").read_text()


def test_a_drivers_stdout_stderr_and_childrens_output_reach_its_log_masked(tmp_path):
    assert _run(tmp_path, inherit_stdout=False) == (
        "connect with password ****** to postgres_cdc_table_1\n"
        "WARN url jdbc:postgresql://postgres:******@h/postgres as user ******\n"
        "the end ******")


def test_with_stdout_on_the_terminal_stderr_still_reaches_the_log_masked(tmp_path, capfd):
    assert _run(tmp_path, inherit_stdout=True) == "WARN url jdbc:postgresql://postgres:******@h/postgres as user ******\n"


KEY = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n-----END PRIVATE KEY-----"
PGP = "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: Keybase\n\nlQOYBGXs3cr3tPgpBody\n=Ab1x\n-----END PGP PRIVATE KEY BLOCK-----"


def _written(tmp_path, secrets, output: str) -> str:
    path = tmp_path / f"attempt-{len(os.listdir(tmp_path)) + 1}.log"
    log = DriverLog(str(path), secrets)
    for line in output.splitlines(True):        # as the relay hands them over: a line at a time
        log.write(line.encode())
    log.close()
    return path.read_text()


def test_a_private_key_block_is_masked_on_every_line_of_it(tmp_path):
    """Review 7, F5: each line was masked alone, so a PEM block's body and END lines were written in clear, even
    with the key a known secret of the job's config; a PGP key block was not matched at all."""
    from seatide.secrets import secret_values

    config = ('env { job.mode = BATCH }\nsource { FakeSource { row.num = 1, schema = { fields { id = bigint } } } }\n'
              f'sink {{ Console {{ private_key = """{KEY}""" }} }}\n')
    secrets = secret_values(config, {})
    assert KEY in secrets
    written = _written(tmp_path, secrets, f"java.lang.IllegalArgumentException: cannot parse key\n{KEY} read\n"
                                          f"then {PGP}\nINFO done\n")
    assert written == ("java.lang.IllegalArgumentException: cannot parse key\n******\n******\n******\n****** read\n"
                       "then ******\n******\n******\n******\n******\n******\nINFO done\n"), written
    # no secret known: the blocks all the same
    assert _written(tmp_path, (), f"{PGP}\n") == "******\n" * 6


def test_a_multi_line_secrets_lines_are_masked_wherever_they_show(tmp_path):
    """A known multi-line value's lines, shown without its BEGIN line (a dump of the config's values)."""
    written = _written(tmp_path, {KEY}, "value: MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n  BKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n")
    assert written == "value: ******\n  ******\n", written


def test_a_key_block_cut_short_leaves_the_rest_of_the_log_readable(tmp_path):
    written = _written(tmp_path, (), "bad key -----BEGIN RSA PRIVATE KEY-----\nMIIcutShort\n"
                                     "24/05/01 12:00:00 INFO SparkContext: stopped\n")
    assert written == "bad key ******\n******\n24/05/01 12:00:00 INFO SparkContext: stopped\n", written
