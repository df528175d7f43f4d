"""A Jdbc target's DROP_DATA over rows a pipeline that is not started over keeps (store/kept_output.py)
is refused before anything is destroyed, as the refusal says ("nothing was destroyed"). The Jdbc
sink carries its step out inside ``save_mode_plan`` (connectors/jdbc/save_modes.plan: the DELETE,
committed), so the door (plugin/save_mode_door.py) asks ``may_destroy`` before it asks for the plan.

The decisions here answer ``may_destroy`` as StoreDecisions does when kept_output names rows that a
pipeline not started over keeps (the store's part is tests/store/test_kept_output.py); the rest is the
runtime's protocol on a real database."""

from __future__ import annotations

import pytest

from seatide.plugin.base import PermanentError
from seatide.runtime.commit_log import FileDecisions, SinkCommitLog, write_exactly_once
from tests.connectors.jdbc_sink_helpers import (  # noqa: F401 - db: the fixture
    db, execute, inserts, query, routes_writer, table_name, txn)


class KeptByAnotherPipeline(FileDecisions):
    """may_destroy as StoreDecisions answers it when kept_output finds rows another pipeline keeps."""

    asked: list[str]

    def may_destroy(self, key: str, target: str, earlier_keys: list[str]) -> dict | None:
        self.asked = [*getattr(self, "asked", []), target]
        if (standing := self.recorded_once(key)) is not None:
            return standing
        raise PermanentError(f"target {target} is shared: pipeline 2, which FINISHED and is not run again, "
                             "keeps the rows it committed there ... nothing was destroyed")


def test_a_drop_data_the_door_refuses_leaves_the_rows_another_pipeline_kept(spark, db, tmp_path):
    job, table = table_name(), table_name()
    execute(db, f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, name VARCHAR(20))",
            f"INSERT INTO {table} VALUES (1, 'kept by pipeline 2')")
    log = SinkCommitLog(str(tmp_path / "log"))
    targets = routes_writer(spark, db, [table], job, data_save_mode="DROP_DATA")
    decisions = KeptByAnotherPipeline(log)
    with pytest.raises(PermanentError, match="nothing was destroyed"):
        write_exactly_once(targets, log, inserts(spark, [2]), 0, txn(job, 0), decisions=decisions)
    assert len(decisions.asked) == 1                                     # asked once, before the plan
    assert query(db, f"SELECT id FROM {table} ORDER BY id") == [(1,)]   # refused: the kept row is still there
