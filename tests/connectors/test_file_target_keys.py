"""Outside review 8b, F9: a LocalFile directory reached through a symlink and directly is one target.

Its key is the directory's real path (the deepest existing ancestor resolved, the rest as written):
two spellings of one directory gave two keys before, so two DROP_DATA decisions were taken for one
directory, and a sink through the link was not the "same target" of a sink writing it directly. The
key SeaTide gave before (the absolute path as spelled) stays findable: the target's save-mode
decision under it (``Target.earlier_keys``), and its state and decided parts in checkpoints
(``previous_targets``, ``publish_parts``)."""

from __future__ import annotations

import os

import pytest

from seatide.config.loader import load_job_text
from seatide.plugin.sink_protocol import open_sink
from seatide.store.target_identity import file_target

SOURCE = 'FakeSource { plugin_output = "a", row.num = 3, schema = { fields { id = "bigint" } } }'


def _sink(path: str):
    job = load_job_text('env { job.mode = "BATCH" }\nsource {\n' + SOURCE + '\n}\nsink {\nLocalFile { path = "'
                        + path + '", file_format_type = "json", data_save_mode = "DROP_DATA" }\n}\n')
    return job.sinks[0].plugin


def _linked(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "link")
    return real, tmp_path / "link"


def test_a_directory_through_a_symlink_and_directly_is_one_key(tmp_path):
    real, link = _linked(tmp_path)
    assert file_target(str(link / "out")) == file_target(str(real / "out")) == str(real / "out")
    assert file_target(str(link)) == file_target(f"file://{real}/") == str(real)
    # a path not made yet: its existing ancestor resolved, the rest as written
    assert file_target(str(link / "not" / "yet")) == str(real / "not" / "yet")
    from seatide.store.target_identity import file_target_spelled
    assert file_target_spelled(str(link / "out")) == str(link / "out")     # the key before


def test_a_sink_through_the_link_opens_the_real_directorys_target_with_its_earlier_key(tmp_path):
    real, link = _linked(tmp_path)
    through, direct = open_sink(_sink(str(link / "out")), None), open_sink(_sink(str(real / "out")), None)
    assert through.keys() == direct.keys() == [str(real / "out")]
    target = through.target(str(real / "out"))
    assert list(target.earlier_keys) == [str(link / "out")]      # a decision an earlier SeaTide recorded under it
    assert target.root == str(link / "out")                      # written as spelled: the same files


def test_a_checkpoint_keyed_by_the_spelled_path_is_the_real_paths(tmp_path):
    real, link = _linked(tmp_path)
    targets = open_sink(_sink(str(link / "out")), None)
    spelled, key = str(link / "out"), str(real / "out")
    assert targets.previous_targets({"targets": {spelled: {"total_rows": 3}}}) == {key: {"total_rows": 3}}
    part = {"moves": [], "staging": []}
    assert targets.publish_parts({"targets": {spelled: part}}) == [(key, part)]


def test_a_path_inside_another_routes_is_not_its_data_when_one_is_spelled_through_the_link(tmp_path):
    from seatide.plugin.tables import TableRoute

    real, link = _linked(tmp_path)
    (real / "out" / "b").mkdir(parents=True)
    (real / "out" / "mine.json").write_text("{}\n")
    (real / "out" / "b" / "theirs.json").write_text("{}\n")
    outer, inner = _sink(str(link / "out")), _sink(str(real / "out" / "b"))
    targets = open_sink(outer, None, [TableRoute(0, "a", None, outer), TableRoute(1, "b", None, inner)])
    assert targets.target(str(real / "out")).data_files() == [str(link / "out" / "mine.json")]


@pytest.mark.spark
def test_a_job_checkpointed_under_the_spelled_key_resumes_through_the_link_keeping_its_rows(spark, tmp_path):
    """A batch committed by the version that keyed the target as spelled (its state under that key)
    is this target's: the resumed DROP_DATA sink does not empty it, and its total carries on."""
    from seatide.runtime.commit_log import SinkCommitLog
    from tests.connectors.test_local_file import ROWS, frame, write

    real, link = _linked(tmp_path)
    (real / "out").mkdir()
    (real / "out" / "batch0.json").write_text('{"id": 0}\n')
    log = SinkCommitLog(str(tmp_path / "log"))
    log.commit(0, {"rows": 1, "total_rows": 1, "targets": {str(link / "out"): {"rows": 1, "total_rows": 1}}})
    result = write(_sink(str(link / "out")), frame(spark), log, batch_id=1)
    assert (real / "out" / "batch0.json").exists(), "the resumed DROP_DATA emptied the committed batch"
    assert result.state["targets"][str(real / "out")]["total_rows"] == 1 + len(ROWS)
