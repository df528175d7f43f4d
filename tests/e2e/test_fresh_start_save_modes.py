"""Review 7: a job whose sink says DROP_DATA, started over with ``--fallback fresh``, wrote the rows
its first lineage committed a second time: the door kept one save-mode decision per job *run* and
target (``P_<run>@<target>``), and a fresh start keeps the run, so its DROP_DATA found the first
lineage's decision (made over an empty path: destroy None) and emptied nothing (1200 rows, 300
twice). A lineage a fresh start began has its save modes made anew (``P_<run>~<incarnation>``,
``runtime/sink_runs.py``), as a new submission would. No other pipeline keeps
rows in the target (store/kept_output.py would say so), so emptying it is what SeaTunnel's
DROP_DATA at a (re)start does and what promise 1 needs.

Real job in the shared SparkSession on a real SQLite store and real files (tests/e2e/harness.py).
"""

from __future__ import annotations

import re
import shutil

import pytest

from seatide import failpoints, intents
from tests.connectors.jdbc_sink_helpers import query, table_name
from tests.e2e.test_jobs import fake_to_parquet, parquet_ids

pytestmark = pytest.mark.spark

PG = ("jdbc:postgresql://127.0.0.1:5432/test", "postgres")


class _LocalFile:
    def __init__(self, root):
        self.out = str(root / "out")

    def sink(self) -> str:
        return f'LocalFile {{ plugin_input = "out", path = "{self.out}", file_format_type = "parquet", ' \
               'data_save_mode = "DROP_DATA" }'

    def ids(self) -> list[int]:
        return parquet_ids(self.out)


class _Jdbc:
    """The same in PostgreSQL: the door's decision is also recorded in the target database (its
    ``seatide_sink_commits``), where ``save_modes.made`` found the first lineage's."""

    def __init__(self, _root):
        self.table = table_name()

    def sink(self) -> str:
        return f'Jdbc {{ plugin_input = "out", url = "{PG[0]}", user = "{PG[1]}", table = "{self.table}", ' \
               'data_save_mode = "DROP_DATA" }'

    def ids(self) -> list[int]:
        return [r[0] for r in query(PG, f"SELECT id FROM {self.table} ORDER BY id")]


@pytest.mark.parametrize("kind", [_LocalFile, _Jdbc], ids=["LocalFile", "Jdbc"])
def test_a_fresh_start_of_a_drop_data_job_empties_the_target_and_leaves_each_row_once(local, tmp_path, monkeypatch,
                                                                                        kind):
    target = kind(tmp_path)
    monkeypatch.setitem(failpoints._POINTS, "driver.after_sink_commit", f"once:raise:{tmp_path / 'crashed'}")
    text = fake_to_parquet(str(tmp_path / "unused"), rows=900, split_num=6, extra_env="checkpoint.interval = 1000\n"
                           "micro-batch.max-rows = 300\njob.retry.times = 0")
    text = re.sub(r"LocalFile \{[^}]*\}", lambda _: target.sink(), text)
    failed = local.run(text)
    assert failed.status == "FAILED" and target.ids() == list(range(300)), failed.error
    (pipeline,) = failed.pipelines()
    shutil.rmtree(pipeline.checkpoint_dir)          # the checkpoint is lost: the operator starts over
    monkeypatch.delitem(failpoints._POINTS, "driver.after_sink_commit")
    intents.resume(local.store, failed.job_id, fallback="fresh", actor="test")
    resumed = local.drive(failed.job_id)
    ids = target.ids()
    assert resumed.status == "FINISHED", resumed.error
    assert ids == list(range(900)), f"{len(ids)} rows, {len(set(ids))} distinct, {len(ids) - len(set(ids))} twice"
