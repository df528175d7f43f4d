"""Review 6: a Jdbc target's DROP_DATA refused by the door (store/kept_output.py, through
StoreDecisions.decide_once) must have destroyed nothing, as the refusal says ("nothing was
destroyed"). The Jdbc sink carries its step out inside ``save_mode_plan`` (connectors/jdbc/
save_modes.plan: the DELETE, committed) before the door asks ``decide_once``; so the rows another
pipeline kept are gone when the refusal comes.

The decisions here answer ``decide_once`` as StoreDecisions does when kept_output names rows that a
pipeline not started over keeps (the store's part is tests/store/test_kept_output.py); the rest is the
runtime's protocol on a real database."""

from __future__ import annotations

import pytest

from seatide.plugin.base import PermanentError
from seatide.runtime.commit_log import FileDecisions, SinkCommitLog, write_exactly_once
from tests.connectors.jdbc_sink_helpers import (  # noqa: F401 - db: the fixture
    db, execute, inserts, query, routes_writer, table_name, txn)


class KeptByAnotherPipeline(FileDecisions):
    """decide_once as StoreDecisions answers it when kept_output finds rows another pipeline keeps."""

    def decide_once(self, key: str, plan: dict) -> dict:
        if plan.get("destroy") is not None and self.recorded_once(key) is None:
            raise PermanentError("target is shared: pipeline 2, which FINISHED and is not run again, keeps the "
                                 "rows it committed there ... nothing was destroyed")
        return super().decide_once(key, plan)


def test_a_drop_data_the_door_refuses_leaves_the_rows_another_pipeline_kept(spark, db, tmp_path):
    job, table = table_name(), table_name()
    execute(db, f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, name VARCHAR(20))",
            f"INSERT INTO {table} VALUES (1, 'kept by pipeline 2')")
    log = SinkCommitLog(str(tmp_path / "log"))
    targets = routes_writer(spark, db, [table], job, data_save_mode="DROP_DATA")
    df = inserts(spark, [2])
    with pytest.raises(PermanentError, match="nothing was destroyed"):
        write_exactly_once(targets, log, df, 0, txn(job, 0), decisions=KeptByAnotherPipeline(log))
    assert query(db, f"SELECT id FROM {table} ORDER BY id") == [(1,)]   # refused: nothing destroyed
