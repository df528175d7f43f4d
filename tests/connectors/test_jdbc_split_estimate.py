"""A whole table's split plan sized by the database's statistics instead of COUNT(*), on real
PostgreSQL and MariaDB: taken only when a density check through the key's index agrees with it,
so stale statistics and a skewed key are counted after all; every row is read once either way,
and a resumed read keeps the plan its offsets logged, whatever the statistics say by then."""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import replace

import pytest

from seatide.connectors.jdbc import source as source_module
from seatide.connectors.jdbc import split_measure
from seatide.connectors.jdbc.split_measure import DENSITY_SLACK, measure
from tests.connectors.test_jdbc_source import URLS, all_ids, execute, jdbc, routed_ctx, run_routed

ROWS = 50_000


def numbers(dialect: str, rows: int) -> str:
    return f"generate_series(1, {rows}) g" if dialect == "postgresql" else f"(SELECT seq AS g FROM seq_1_to_{rows}) s"


def analyze(dialect: str, name: str) -> None:
    execute(dialect, f"ANALYZE {name}" if dialect == "postgresql" else f"ANALYZE TABLE {name}")


@pytest.fixture(params=sorted(URLS))
def keyed(request):
    """(dialect, make): ``make(key_sql)`` creates a table of ROWS rows whose bigint primary key is
    ``key_sql`` of g = 1..ROWS, analyzed; every table made is dropped afterwards."""
    dialect, made = request.param, []

    def make(key_sql: str = "g") -> str:
        name = f"jdbc_estimate_{secrets.token_hex(4)}"
        made.append(name)
        execute(dialect, f"CREATE TABLE {name} (id bigint PRIMARY KEY, name varchar(20))",
                f"INSERT INTO {name} SELECT {key_sql}, concat('n', g) FROM {numbers(dialect, ROWS)}")
        analyze(dialect, name)
        return name

    yield dialect, make
    for name in made:
        execute(dialect, f"DROP TABLE IF EXISTS {name}")


class Recording:
    """A connection whose cursors note every statement they run."""

    def __init__(self, conn):
        self.conn, self.statements = conn, []

    def cursor(self):
        cursor, statements = self.conn.cursor(), self.statements

        class Cursor:
            def execute(self, sql, *args):
                statements.append(sql)
                return cursor.execute(sql, *args)

            def __getattr__(self, name):
                return getattr(cursor, name)

        return Cursor()


def planned(source) -> tuple:
    """(the source's plan for its checkpointed read, the statements measuring it ran)."""
    with source.url.connect(source.opts["user"], source.opts["password"], autocommit=True) as conn:
        recording = Recording(conn)
        return measure(recording, source._split_spec()), recording.statements


def counted(statements: list[str]) -> bool:
    """Whether measuring counted the rows (the density check's count of its windows aside)."""
    return any("COUNT(*)" in s and "seatide_t WHERE (" not in s for s in statements)


def true_rows(dialect: str, name: str) -> int:
    with jdbc(dialect, f'table_path = "{name}"').url.connect(autocommit=True) as conn:
        cursor = conn.cursor()
        cursor.execute(f"SELECT COUNT(*) FROM {name}")
        return cursor.fetchone()[0]


def test_a_whole_table_is_sized_by_its_statistics_without_counting_it(keyed):
    dialect, make = keyed
    name = make()
    plan, statements = planned(jdbc(dialect, f'table_path = "{name}"\nsplit.size = 5000'))
    assert not counted(statements)
    assert (plan.lower, plan.upper) == (1, ROWS)              # the bounds are exact: the key's index
    assert ROWS / DENSITY_SLACK <= plan.rows <= ROWS * DENSITY_SLACK


def test_a_query_or_a_filter_is_still_counted(keyed):
    dialect, make = keyed
    name = make()
    for body in (f'table_path = "{name}"\nwhere_condition = "where id > 10"',
                 f'query = "select * from {name}"\npartition_column = "id"'):
        plan, statements = planned(jdbc(dialect, body))
        assert counted(statements) and plan.rows == ROWS - (10 if "where" in body else 0)


def test_statistics_the_key_s_density_contradicts_are_not_trusted(keyed):
    dialect, make = keyed
    name = make()
    # four rows in five go after the statistics were taken: PostgreSQL's still predict every row
    execute(dialect, f"DELETE FROM {name} WHERE MOD(id, 5) <> 0")
    plan, statements = planned(jdbc(dialect, f'table_path = "{name}"\nsplit.size = 5000'))
    truth = ROWS // 5
    assert truth / DENSITY_SLACK <= plan.rows <= truth * DENSITY_SLACK
    if dialect == "postgresql":
        assert counted(statements) and plan.rows == truth


def test_rows_added_since_the_statistics_between_the_probes_windows_are_counted(keyed):
    dialect, make = keyed
    if dialect != "postgresql":
        pytest.skip("MariaDB keeps no count of the rows changed since ANALYZE")
    name = make("g * 1000")                 # keys 1000 .. 50,000,000, analyzed
    # eight times the rows, bunched in 1 % of the key range where no probe window looks
    execute(dialect, f"INSERT INTO {name} SELECT 3000000 + g, NULL FROM {numbers(dialect, 8 * ROWS)} "
                     "WHERE MOD(g, 1000) <> 0")    # not the analyzed rows' keys
    plan, statements = planned(jdbc(dialect, f'table_path = "{name}"\nsplit.size = 5000'))
    assert counted(statements) and plan.rows == ROWS + 8 * ROWS - 8 * ROWS // 1000


def test_a_skewed_key_is_counted_and_every_row_read_once(spark, keyed, tmp_path):
    dialect, make = keyed
    name = make()
    execute(dialect, f"INSERT INTO {name} (id, name) VALUES (1000000000000, 'far away')")
    analyze(dialect, name)
    source = jdbc(dialect, f'table_path = "{name}"\nsplit.size = 5000')
    plan, statements = planned(source)
    # the windows spread over 1..10^12 find the 50,000 rows bunched in the first one
    assert counted(statements) and plan.rows == ROWS + 1
    batches: dict[int, list] = {}
    run_routed(source, routed_ctx(spark, max_rows=20_000), str(tmp_path / "ck"), batches)
    assert all_ids(batches) == [*range(1, ROWS + 1), 1_000_000_000_000]


def test_a_sparse_key_is_sized_by_its_statistics_and_batches_keep_their_limit(spark, keyed, tmp_path):
    dialect, make = keyed
    name = make("g * 1000")
    source = jdbc(dialect, f'table_path = "{name}"\nsplit.size = 5000')
    plan, statements = planned(source)
    assert not counted(statements) and ROWS / DENSITY_SLACK <= plan.rows <= ROWS * DENSITY_SLACK
    batches: dict[int, list] = {}
    run_routed(source, routed_ctx(spark, max_rows=20_000), str(tmp_path / "ck"), batches)
    assert all_ids(batches) == [g * 1000 for g in range(1, ROWS + 1)]
    assert max(len(ids) for ids in batches.values()) <= 20_000 * DENSITY_SLACK


def test_a_resumed_read_keeps_its_logged_plan_when_the_statistics_change(spark, keyed, tmp_path, monkeypatch):
    dialect, make = keyed
    name = make()
    body = f'table_path = "{name}"\nsplit.size = 5000'
    checkpoint = str(tmp_path / "ck")
    batches: dict[int, list] = {}
    with pytest.raises(Exception, match="injected failure"):
        run_routed(jdbc(dialect, body), routed_ctx(spark, max_rows=20_000), checkpoint, batches, fail_on_batch=1)
    failed_attempt = batches.pop(1)
    # Measured now, the table would plan otherwise: twice the rows, a range 1,000 times wider.
    execute(dialect, f"INSERT INTO {name} SELECT g * 1000 + {ROWS}, 'late' FROM {numbers(dialect, ROWS)}")
    analyze(dialect, name)
    for module in (split_measure, source_module):
        monkeypatch.setattr(module, "measure", lambda *a, **k: pytest.fail("a resumed read measured again"))
    resumed: dict[int, list] = {}
    ctx = replace(routed_ctx(spark, max_rows=20_000), resuming=True)        # as a job finds its checkpoint
    run_routed(jdbc(dialect, body), ctx, checkpoint, resumed)
    assert min(resumed) == 1 and resumed[1] == failed_attempt       # the failed batch replayed as it was
    assert all_ids({**batches, **resumed}) == list(range(1, ROWS + 1))  # none twice, none skipped
    logged = [json.loads(open(os.path.join(checkpoint, "spark", "offsets", b)).read().splitlines()[2])["plans"]
              for b in sorted(os.listdir(os.path.join(checkpoint, "spark", "offsets"))) if b.isdigit()]
    assert all(plans == logged[0] for plans in logged) and logged[0][0]["upper"] == ROWS
