"""Review 7: plan/shared_targets.py takes two sinks with equal *written* options for one target, but a
Jdbc sink with no `table` writes the input table's name (SeaTunnel's default, ${table_name}, which
SeaTide's own Jdbc.table_defaults fills in): two such sinks fed by differently named tables write two
tables, and a valid SeaTunnel config is refused, its message naming a shared target that is not."""

from __future__ import annotations

import pytest

from seatide.config.loader import load_job_text

CONFIG = """
env { job.mode = "BATCH" }
source {
  FakeSource { plugin_output = "orders", row.num = 3,
               schema = { table = "test.orders", fields { id = "bigint", name = "string" } } }
  FakeSource { plugin_output = "customers", row.num = 3,
               schema = { table = "test.customers", fields { id = "bigint", name = "string" } } }
}
sink {
  # orders is a snapshot, emptied each run; customers are appended
  Jdbc { plugin_input = "orders", url = "jdbc:mysql://127.0.0.1:3306/test", user = "root", password = "p",
         data_save_mode = "DROP_DATA" }
  Jdbc { plugin_input = "customers", url = "jdbc:mysql://127.0.0.1:3306/test", user = "root", password = "p",
         data_save_mode = "APPEND_DATA" }
}
"""


def test_jdbc_sinks_defaulting_to_their_input_tables_are_two_targets_and_planned():
    job = load_job_text(CONFIG)
    # each sink writes its own input table: test.orders and test.customers
    assert [sink.plugin.spec().table[-1] for sink in job.sinks] == ["orders", "customers"]


TWO_EMPTYING = """
env { job.mode = "BATCH" }
source {
  FakeSource { plugin_output = "a", row.num = 3, schema = { fields { id = "bigint" } } }
  FakeSource { plugin_output = "b", row.num = 3, schema = { fields { id = "bigint" } } }
}
sink {
  LocalFile { plugin_input = "a", path = "/tmp/review7-out", file_format_type = "json", data_save_mode = "DROP_DATA" }
  LocalFile { plugin_input = "b", path = "/tmp/review7-out", file_format_type = "json", data_save_mode = "DROP_DATA",
              schema_save_mode = "RECREATE_SCHEMA" }
}
"""


def test_two_sinks_that_both_empty_one_target_are_planned():
    # Whichever prepares the path first empties it once; the other finds that decision (plugin/save_mode_door.py):
    # no row of either is written before it, so nothing races. SeaTunnel runs both at the job's start. A
    # LocalFile path's RECREATE_SCHEMA empties it as DROP_DATA does: one step (review 8, H2 refuses two
    # different steps, tests/plan/test_review8_shared_targets.py)
    load_job_text(TWO_EMPTYING)


def test_one_path_spelled_with_and_without_its_slash_is_one_target_when_planned():
    # store/target_identity.py: the plan and the door name a target one way (`out` and `out/` were two
    # targets to the plan and one to the door, whose refusal came only after rows were written)
    from seatide.config.job import ConfigError
    text = TWO_EMPTYING.replace('schema_save_mode = "RECREATE_SCHEMA"', 'path = "/tmp/review7-out/"')
    text = text.replace('path = "/tmp/review7-out", file_format_type = "json", data_save_mode = "DROP_DATA",\n',
                        'file_format_type = "json", data_save_mode = "APPEND_DATA",\n')
    assert 'review7-out/"' in text and "APPEND_DATA" in text, text
    with pytest.raises(ConfigError, match="write the same target"):
        load_job_text(text)
