"""One nesting rule for the reader, the resolver and the shade (``hocon.values.too_deep``): a job
the reader accepts is one the shade decodes, so its decoded passwords are masked.

Before, the parser did not count the document's own level and the shade did: a list 99 deep
under ``env`` read, ``decrypt_config`` refused it, ``secrets`` took the refusal for "nothing
hidden", and the base64-decoded password showed in clear in a connector's message."""

from __future__ import annotations

import base64
import subprocess
import sys

import pytest

from seatide.config.hocon import MAX_NESTING
from seatide.config.job_text import JobTextError, read_job_text
from seatide.config.shade import decrypt_config
from seatide.secrets import mask_message, secrets_of

PASSWORD = "Tr0ub4dor&3xyz"
ENCODED = base64.b64encode(PASSWORD.encode()).decode()


def _job(env_extra: str, source_extra: str = "") -> str:
    return (f"env {{ parallelism = 1, shade.identifier = base64\n  {env_extra} }}\n"
            f"source {{ FakeSource {{ result_table_name = t, password = \"{ENCODED}\"{source_extra}\n"
            "  schema = { fields { id = bigint } } } }\n"
            "sink { Console {} }\n")


AT_THE_LIMIT = _job("x = " + "[" * (MAX_NESTING - 1) + "1" + "]" * (MAX_NESTING - 1))   # innermost at level 100


def test_a_job_nested_to_the_limit_is_decoded_and_its_password_masked():
    job = read_job_text(AT_THE_LIMIT)
    assert PASSWORD in str(decrypt_config(job.tree, runs_here=False)["source"])
    assert PASSWORD not in mask_message(f"connect failed: password {PASSWORD}", secrets_of(job))


def test_one_level_more_is_refused_by_the_reader():
    with pytest.raises(JobTextError, match=f"more than {MAX_NESTING} levels"):
        read_job_text(_job("x = " + "[" * MAX_NESTING + "1" + "]" * MAX_NESTING))


def test_a_substituted_value_counts_from_the_level_it_is_put_at():
    # a 97-part key set to a value 98 deep: the tree is ~195 deep, though each part reads alone
    key = ".".join(["o"] * 97)
    deep = "{k = " * 98 + "1" + "}" * 98
    with pytest.raises(JobTextError, match=f"more than {MAX_NESTING} levels") as caught:
        read_job_text(_job(f"{key} = ${{d}}") + f"d = {deep}\n")
    assert caught.value.line == 2
    # the same value at a shallow key reads, and the shade decodes it
    job = read_job_text(_job("o = ${d}") + f"d = {deep}\n")
    assert PASSWORD not in mask_message(PASSWORD, secrets_of(job))


def test_a_password_that_does_not_decode_does_not_unmask_the_one_that_does():
    job = read_job_text(_job("shade.options = [password, token]", ', token = "not base64!"'))
    assert PASSWORD not in mask_message(f"password {PASSWORD}", secrets_of(job))


def test_seatunnel_decrypt_reads_what_check_reads(tmp_path):
    conf = tmp_path / "job.conf"
    conf.write_text(AT_THE_LIMIT)
    run = [sys.executable, "-m", "seatide.cli.seatunnel"]
    checked = subprocess.run([*run, "--check", "-c", str(conf)], capture_output=True, text=True, timeout=120)
    decrypted = subprocess.run([*run, "--decrypt", "-c", str(conf)], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stderr
    assert decrypted.returncode == 0, decrypted.stderr
    assert PASSWORD in decrypted.stdout


def test_a_shade_that_cannot_be_read_still_lets_the_refusal_be_masked():
    from seatide.secrets import secret_values

    text = _job("").replace("shade.identifier = base64", "shade.identifier = foo")
    assert "Pw-Sec-77" in secret_values(text, {"db_password": "Pw-Sec-77"})
