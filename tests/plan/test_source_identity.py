"""A pipeline's fingerprint is over what its sources are (plan/source_identity.py): the same job
spelled otherwise keeps it, in every process; a change of what a source reads does not."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest

from seatide.config.loader import job_as_json, load_job_text
from seatide.config.shade import KEY_FILE_ENV, encrypt_config
from seatide.plan.dag import build_plan
from tests.config.test_shade import _key_file

JOB = """
env { job.mode = BATCH }
source { FakeSource { row.num = 4, split.num = 2, password = "pw", string.fake.mode = "range",
                      schema = { fields { id = bigint, name = string } } } }
sink { Console {} }
"""


def fingerprint(text: str, **load) -> str:
    return build_plan(load_job_text(text, **load)).pipelines[0].fingerprint()


@pytest.mark.parametrize("spelled", [
    json.dumps(job_as_json(JOB)),                                                    # SeaTunnel's JSON form
    JOB.replace("FakeSource {", "fakesource {"),                                     # the plugin's name in lower case
    JOB.replace("row.num = 4", 'row { num = "4" }'),                                 # nested, and "4" for 4
    JOB.replace('string.fake.mode = "range"', 'string.fake.mode = "RANGE"'),         # an enum's case
    JOB.replace('password = "pw"', 'password = "rotated"'),                          # a credential: who reads
    JOB.replace("row.num = 4", "row.num = 4, parallelism = 1, plugin_output = x"),   # wiring
])
def test_the_same_source_spelled_otherwise_keeps_its_fingerprint(spelled):
    assert fingerprint(spelled) == fingerprint(JOB)


@pytest.mark.parametrize("changed", [JOB.replace("row.num = 4", "row.num = 5"),
                                     JOB.replace("split.num = 2", "split.num = 3")])
def test_a_change_of_what_a_source_reads_changes_it(changed):
    assert fingerprint(changed) != fingerprint(JOB)


def test_base64_shaded_options_count_by_their_value_in_clear():
    tree = copy.deepcopy(job_as_json(JOB.replace("split.num = 2", 'split.num = "2"')))
    tree["env"]["shade.identifier"], tree["env"]["shade.options"] = "base64", ["split.num"]
    shaded = encrypt_config(tree)
    assert shaded["source"][0]["split"]["num"] == "Mg=="
    assert fingerprint(json.dumps(shaded)) == fingerprint(JOB)


def test_an_aes256_job_has_one_fingerprint_with_the_key_and_without(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_FILE_ENV, _key_file(tmp_path))
    tree = copy.deepcopy(job_as_json(JOB.replace("split.num = 2", 'split.num = 2, string.template = ["a", "b"]')))
    tree["env"]["shade.identifier"], tree["env"]["shade.options"] = "aes256", ["string.template"]
    text = json.dumps(encrypt_config(tree))
    driver = fingerprint(text)
    assert fingerprint(json.dumps(encrypt_config(tree))) == driver       # encrypted again, the same
    monkeypatch.delenv(KEY_FILE_ENV)
    assert fingerprint(text, runs_here=False) == driver                  # a coordinator checking a resume


def test_a_fingerprint_of_the_version_before_still_fits_either_file_form():
    pipeline = build_plan(load_job_text(JOB)).pipelines[0]
    as_json = build_plan(load_job_text(json.dumps(job_as_json(JOB)))).pipelines[0]
    for before in (_written_fingerprint(pipeline), _written_fingerprint(as_json)):
        assert pipeline.fits(before) and as_json.fits(before)
    assert pipeline.fingerprint() != _written_fingerprint(pipeline)
    assert not pipeline.fits(_written_fingerprint(build_plan(load_job_text(JOB.replace("= 4", "= 5"))).pipelines[0]))


def _written_fingerprint(pipeline) -> str:
    """The fingerprint of the version before, spelled out: each source's block as written, but
    for its links and parallelism."""
    ignored = {"plugin_output", "result_table_name", "plugin_input", "source_table_name", "parallelism"}
    shape = [[s.name, {k: v for k, v in sorted(s.block.items()) if k not in ignored}] for s in pipeline.sources]
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]


def test_an_option_under_its_alias_is_the_same_option():
    alias = JOB.replace("row.num = 4", 'row.num = 4, int.template = [1, 2], int.fake.template = "template"')
    assert fingerprint(alias) == fingerprint(alias.replace("int.fake.template", "int.fake.mode")) != fingerprint(JOB)


SHADED = JOB.replace("split.num = 2", 'split.num = "2"')


def _base64(text: str, options: list[str]) -> str:
    """``seatunnel --encrypt``'s output for ``text`` under a base64 shade over ``options`` too."""
    tree = copy.deepcopy(job_as_json(text))
    tree["env"]["shade.identifier"], tree["env"]["shade.options"] = "base64", options
    return json.dumps(encrypt_config(tree))


@pytest.mark.parametrize("options", [[], ["split.num"]])
def test_a_base64_round_trip_fits_a_checkpoint_of_the_version_before(options):
    """The version before fingerprinted the block as written: ciphertext where there is clear text now,
    or the other way round. A base64 value reads anywhere, so both forms are rebuilt."""
    clear = build_plan(load_job_text(SHADED)).pipelines[0]
    shaded = build_plan(load_job_text(_base64(SHADED, options))).pipelines[0]
    assert shaded.fits(_written_fingerprint(clear)), "encrypted after the upgrade"
    # decrypted, with shade.identifier dropped: options beyond the credentials are known by shade.options kept
    kept = SHADED.replace("job.mode = BATCH", f"job.mode = BATCH, shade.options = {json.dumps(options)}")
    assert build_plan(load_job_text(kept)).pipelines[0].fits(_written_fingerprint(shaded)), "decrypted after"
    if not options:
        assert clear.fits(_written_fingerprint(shaded))
    moved = build_plan(load_job_text(_base64(SHADED.replace('"2"', '"3"'), options))).pipelines[0]
    assert not moved.fits(_written_fingerprint(clear))
    assert not build_plan(load_job_text(kept)).pipelines[0].fits(_written_fingerprint(moved))


@pytest.mark.parametrize("stored", [["x"], {"a": 1}, 7, None, ""])
def test_a_stored_fingerprint_of_another_shape_does_not_fit_and_raises_nothing(stored):
    assert not build_plan(load_job_text(JOB)).pipelines[0].fits(stored)


def test_the_fingerprint_names_the_rule_that_made_it():
    """A later release that declares another option or alias keeps this rule for checkpoints written
    under it (plan/source_identity.py, IDENTITY_VERSION)."""
    pipeline = build_plan(load_job_text(JOB)).pipelines[0]
    version, _, digest = pipeline.fingerprint().partition(":")
    assert version == "v2" and len(digest) == 16
    assert pipeline.fits(digest), "written by this rule before it was named"
    assert not pipeline.fits("v9:" + digest), "a rule this release does not know"
