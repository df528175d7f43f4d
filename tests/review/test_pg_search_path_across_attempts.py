"""Review of 42aea34 (F10): an unqualified PostgreSQL table is resolved "once when its targets open",
i.e. once per driver attempt. A schema first on the role's search_path made between two attempts
(a driver SIGKILLed after the database commit of batch 0, before the runtime's log) moves the next
attempt's key, its table and its commit records' home: the replayed batch 0 is not found and lands
a second time, in another table (promise 1)."""

from __future__ import annotations

import pytest

from seatide.plugin.sink_protocol import open_sink
from tests.connectors.jdbc_sink_helpers import context, execute, inserts, make_sink, query, write
from tests.connectors.test_jdbc_search_path_keys import pg  # noqa: F401 - the fixture

pytestmark = pytest.mark.spark


def test_a_replayed_batch_after_a_search_path_schema_appears_is_found_and_not_written_again(spark, pg, tmp_path):
    url, role = pg
    first = open_sink(make_sink((url, role), table="orders", primary_keys=["id"]), context(spark, "j"))
    write(first, tmp_path / "log", inserts(spark, [1, 2]), 0)
    assert query((url, "postgres"), "SELECT id FROM public.orders ORDER BY id") == [(1,), (2,)]
    execute((url, "postgres"), "CREATE SCHEMA own")     # e.g. a schema named for the role ("$user", public)
    # the driver died after the database commit, before the runtime's log: the next attempt replays batch 0
    again = open_sink(make_sink((url, role), table="orders", primary_keys=["id"]), context(spark, "j"))
    keys = (list(first.keys()), list(again.keys()))
    result = write(again, tmp_path / "lost-log", inserts(spark, [1, 2]), 0)
    own = query((url, "postgres"), "SELECT tablename FROM pg_tables WHERE schemaname = 'own' ORDER BY 1")
    twice = query((url, "postgres"), "SELECT id FROM own.orders ORDER BY id") if ("orders",) in own else []
    assert (result.replayed, own, twice, keys[1]) == (True, [], [], keys[0])


def test_an_existing_table_found_later_on_the_search_path_is_the_one_written(spark, pg, tmp_path):
    """search_path = own, public; ``own`` exists, the table exists in ``public`` only. PostgreSQL (and
    SeaTunnel, which writes the name as given) resolves ``orders`` to ``public.orders``; the sink now
    writes ``current_schema()``'s (``own``), creating ``own.orders``: the job's rows go to a table the
    user never named, the user's table gets none."""
    from seatide.runtime.commit_log import SinkCommitLog
    from seatide.runtime.sink_runs import sink_run

    url, role = pg
    execute((url, "postgres"), "CREATE SCHEMA own", f"GRANT ALL ON SCHEMA own TO {role}",
            "CREATE TABLE public.orders (id BIGINT PRIMARY KEY, name TEXT)", f"GRANT ALL ON public.orders TO {role}")
    run = sink_run(make_sink((url, role), table="orders", primary_keys=["id"]), context(spark, "j"),
                   SinkCommitLog(str(tmp_path / "p1")), transaction_prefix="T_j_1_0_L1_")
    run.write(inserts(spark, [1, 2]), 0)
    own = query((url, "postgres"), "SELECT tablename FROM pg_tables WHERE schemaname = 'own' AND tablename = 'orders'")
    assert (query((url, "postgres"), "SELECT id FROM public.orders ORDER BY id"), own) == ([(1,), (2,)], [])
