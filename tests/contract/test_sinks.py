"""The sink contract suite: the cases every sink passes, run against each sink's small context
(``systems.py``). A new sink is not done until it passes them.

Every case drives the sink through the one protocol as a driver does (``runtime.sink_runs``):
decisions in a real store (SQLite, one per module: the store's own mechanism is tested in
tests/runtime and tests/store), fenced by attempts the test makes current and LOST as the
leader does; zombies are threads held at a named failpoint. The shared SparkSession writes the
rows. Each case's docstring says its purpose, how it works, what passing means, and what it
requires of the sink.
"""

from __future__ import annotations

import pytest

from seatide import failpoints
from seatide.plugin.base import PermanentError
from seatide.store.db import AttemptFenced, open_store
from tests.connectors.hive_server import hive_metastore
from tests.contract.harness import Pipeline, Zombie, changes, routes, rows, tables
from tests.contract.systems import (HiveSystem, HttpSystem, IcebergSystem, JdbcSystem, LocalFileSystem, PaimonSystem,
                                    RedisSystem, jdbc_database)

pytestmark = pytest.mark.spark
__all__ = ["hive_metastore"]

SINKS = ["LocalFile", "Hive", "Paimon", "PostgreSQL", "MariaDB", "Iceberg", "Redis", "Http"]
KEYED = ["PostgreSQL-keyed", "MariaDB-keyed"]      # contexts of the cases about changes applied by key
OLD = [900, 901]          # rows in a target before the job: not the job's


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    st = open_store(f"sqlite:///{tmp_path_factory.mktemp('contract-store')}/state.db")
    yield st
    st.dispose()


@pytest.fixture(scope="module")
def postgresql_database():
    yield from jdbc_database("PostgreSQL")


@pytest.fixture(scope="module")
def mariadb_database():
    yield from jdbc_database("MariaDB")


def make_system(name: str, request, tmp_path):
    """The context ``name`` (a database or metastore asked for only when its context runs)."""
    if name == "Hive":
        return HiveSystem(request.getfixturevalue("hive_metastore"))
    if name == "Paimon":
        return PaimonSystem(str(tmp_path))
    if name == "LocalFile":
        return LocalFileSystem(str(tmp_path))
    if name == "Iceberg":
        return IcebergSystem(str(tmp_path))
    if name == "Redis":
        return RedisSystem(request.getfixturevalue("redis_server"))
    if name == "Http":
        return HttpSystem(request.getfixturevalue("http_server"))
    server = name.removesuffix("-keyed")
    return JdbcSystem(server, request.getfixturevalue(f"{server.lower()}_database"), keyed=name.endswith("-keyed"))


@pytest.fixture(params=SINKS)
def system(request, tmp_path):
    return make_system(request.param, request, tmp_path)


@pytest.fixture
def pipeline(store, tmp_path):
    return Pipeline(store, str(tmp_path / "checkpoints"))


def removing(system) -> dict:
    """Options of a save mode that removes what a target held, or none (the sink has no such mode)."""
    return next((options for options, effect in system.save_modes.values() if effect == "removes"), {})


def test_a_decided_batch_is_published_once_whoever_replays_it(spark, system, pipeline, monkeypatch):
    """Purpose: a batch decided by an attempt that died before publishing lands once.

    How: attempt 1 decides batch 0 and dies right after its decision (``sink.after_decision``);
    attempt 2 opens the sink (rolling decided batches forward), Spark replays batch 0, then
    batch 1 comes, and batch 1 is replayed once more.
    Passing: every row once; the replays report ``replayed`` and write nothing. An at-least-once
    sink (``exactly_once`` False) sends batch 0 again, each row under its first key: a receiver
    keeping one row a key sees every row once (its ``read`` fails on a key sent with another row).
    Requires: a sink decided in the store, or one whose own commit record says the batch is done.
    """
    target = system.new_target()
    monkeypatch.setitem(failpoints._POINTS, "sink.after_decision", "raise")
    with pytest.raises(failpoints.FailpointError):
        pipeline.open(pipeline.attempt(), system.sink(target), spark).write(rows(spark, [1, 2]), 0)
    monkeypatch.delitem(failpoints._POINTS, "sink.after_decision")
    run = pipeline.open(pipeline.attempt(), system.sink(target), spark)
    assert system.read(target) == [1, 2]                  # rolled forward at the pipeline's start
    assert run.write(rows(spark, [1, 2]), 0).replayed != (not system.exactly_once)
    assert system.read(target) == [1, 2]
    assert not run.write(rows(spark, [3]), 1).replayed
    assert run.write(rows(spark, [3]), 1).replayed
    assert system.read(target) == [1, 2, 3]


ZOMBIE_STEPS = ["sink.save_modes", "sink.save_modes_decided", "sink.before_decision", "sink.after_decision",
                "sink.table_published"]


@pytest.mark.parametrize("step", ZOMBIE_STEPS)
def test_a_zombie_held_at_any_step_adds_nothing_and_removes_nothing_of_its_replacement(spark, system, pipeline,
                                                                                     monkeypatch, tmp_path, step):
    """Purpose: a driver replaced while it runs (a zombie) never adds a row twice nor removes a
    row its replacement wrote, whichever step it was at.

    How: a target holds rows from before the job; the sink's removing save mode (if it has one).
    Attempt 1 runs batch 0 and is held at ``step``; the test replaces it with attempt 2, which
    writes batch 0; then the zombie is let go.
    Passing: the target holds batch 0 once and, with a removing save mode, none of the old
    rows; the zombie ended fenced (``AttemptFenced``) or, held after its decision, having
    published only what it had decided (once).
    Requires: destructive steps decided once and carried out as decided; a fenced decision or
    commit point; an idempotent publish.
    """
    target = system.new_target()
    system.put(target, OLD)
    options = removing(system)
    if step.startswith("sink.save_modes") and not options:
        pytest.skip(f"{system.name} has no save mode that removes rows")
    zombie_attempt = pipeline.attempt()
    zombie = Zombie(step, str(tmp_path / "gate"), monkeypatch,
                    lambda: pipeline.open(zombie_attempt, system.sink(target, **options), spark)
                    .write(rows(spark, [1, 2]), 0))
    pipeline.open(pipeline.attempt(), system.sink(target, **options), spark).write(rows(spark, [1, 2]), 0)
    outcome = zombie.release()
    expected = ([] if options else OLD) + [1, 2]
    assert system.read(target) == sorted(expected)
    if step in ("sink.after_decision", "sink.table_published"):
        assert "result" in outcome or isinstance(outcome.get("error"), AttemptFenced), outcome
    else:
        assert isinstance(outcome.get("error"), AttemptFenced), outcome


def test_two_tables_sharing_one_target_keep_each_others_rows(spark, system, pipeline):
    """Purpose: tables routed to one target (shards merged, two tables in one path) are one
    target: its save modes are made once, before its first rows, never again for a table first
    seen later (issue 30, finding 1).

    How: two routes into one target, which holds rows from before the job; the removing save mode.
    Table A has rows in batch 0, table B first in batch 1, both in batch 2.
    Passing: the old rows are gone, and every row of A and B is there once (A's batch 0 too).
    Requires: ``target_key`` equal for both routes.
    """
    target = system.new_target()
    system.put(target, OLD)
    run = pipeline.open(pipeline.attempt(), routes(system, [target, target], **removing(system)), spark)
    run.write(tables(spark, {0: [1, 2]}), 0)
    run.write(tables(spark, {1: [10]}), 1)
    run.write(tables(spark, {0: [3], 1: [11]}), 2)
    expected = ([] if removing(system) else OLD) + [1, 2, 3, 10, 11]
    assert system.read(target) == sorted(expected)


def test_a_table_added_on_resume_destroys_nothing_written_and_a_new_target_is_prepared(spark, system, pipeline):
    """Purpose: a table added to a stopped job, then resumed, finds its target prepared if the
    job wrote it, and prepares it if the job never did (issue 30, finding 2).

    How: with the removing save mode, a job of table A writes batches 0 and 1 into target T; the
    job resumes (a new attempt, the same checkpoint) with table B into T and table C into a new
    target U, both holding rows from before the job; batch 2 has rows of A, B and C.
    Passing: T holds A's and B's rows once (A's earlier batches too); U holds C's rows and, with a
    removing save mode, none of its old rows.
    Requires: the sink's committed state names the targets it wrote.
    """
    options = removing(system)
    first, second = system.new_target(), system.new_target()
    system.put(first, OLD)
    system.put(second, OLD)
    run = pipeline.open(pipeline.attempt(), routes(system, [first], **options), spark)
    run.write(tables(spark, {0: [1]}), 0)
    run.write(tables(spark, {0: [2]}), 1)
    resumed = pipeline.open(pipeline.attempt(), routes(system, [first, first, second], **options), spark)
    resumed.write(tables(spark, {0: [3], 1: [10], 2: [20]}), 2)
    kept = [] if options else OLD
    assert system.read(first) == sorted(kept + [1, 2, 3, 10])
    assert system.read(second) == sorted(kept + [20])


def test_an_empty_first_batch_prepares_every_target_once(spark, system, pipeline):
    """Purpose: every target of the sink's routes is prepared at the first batch the pipeline
    runs, with its rows or none, as SeaTunnel makes every table's save modes when the job starts
    (a CDC stream's first batch, its snapshot of empty tables, has none): a missing target is
    created, a removing save mode removes what the target held; and what it removed is not
    removed again when a restart finds the target prepared but not yet written.

    How: two tables, table 0 into a target holding rows from before the job, table 1 into a
    target that does not exist yet (where the sink creates targets); the removing save mode.
    Batch 0 has no rows. Then another writer adds a row, the job restarts (a new attempt), and
    batch 1 has rows of table 0.
    Passing: after batch 0 the missing target exists and, with a removing save mode, the old
    rows are gone; at the end the other writer's row and batch 1's are there, once.
    Requires: ``missing_target`` and ``exists`` in the context of a sink that creates targets.
    """
    options = removing(system)
    held, missing = system.new_target(), system.missing_target()
    system.put(held, OLD)
    targets = [held] + ([missing] if missing else [])
    pipeline.open(pipeline.attempt(), routes(system, targets, **options), spark).write(tables(spark, {}), 0)
    kept = [] if options else OLD
    assert system.read(held) == kept
    assert missing is None or system.exists(missing), f"{missing} was not created"
    other = [500] if system.concurrent_writers else []
    system.put(held, other)
    pipeline.open(pipeline.attempt(), routes(system, targets, **options), spark).write(tables(spark, {0: [1]}), 1)
    assert system.read(held) == sorted(kept + other + [1])


@pytest.mark.parametrize("system", SINKS + KEYED, indirect=True)
def test_a_key_moved_between_routes_in_one_batch_ends_as_its_last_change(spark, system, pipeline):
    """Purpose: one key's changes apply in ``__row_seq`` order across every route that writes it
    (issue 30, finding 3: a row deleted from shard 1 and inserted into shard 0 in one transaction
    must exist afterwards).

    How: two routes into one target, which holds key 7; in one batch route 1 deletes key 7
    (earlier ``__row_seq``) and route 0 inserts it (later), and route 0 inserts key 8 that
    route 1 then deletes.
    Passing: key 7 is in the target once, key 8 is not.
    Requires: a sink that applies changes by key (``keyed``).
    """
    if not system.keyed:
        pytest.skip(f"{system.name} appends: it takes no deletes, so no key moves")
    target = system.new_target()
    system.put(target, [7])
    run = pipeline.open(pipeline.attempt(), routes(system, [target, target]), spark)
    run.write(changes(spark, {1: [(7, "-D", 1), (8, "-D", 4)], 0: [(7, "+I", 2), (8, "+I", 3)]}), 0)
    assert system.read(target) == [7]


def test_a_concurrent_writers_rows_stay_and_the_jobs_land_once(spark, system, pipeline, monkeypatch, tmp_path):
    """Purpose: where another writer may add to a target while the sink writes, the sink's save
    modes remove only what was there when they were decided, and its rows land once.

    How: the target holds old rows; attempt 1 decides its removing save mode and is held before
    carrying it out (``sink.save_modes_decided``); another writer adds rows; attempt 1 goes on,
    writes batch 0, then crashes and attempt 2 writes batch 1 while the other writer adds more.
    Passing: the other writer's rows are all there, the old ones are gone (with a removing save
    mode), and the job's rows are there once.
    Requires: ``concurrent_writers`` (skipped otherwise).
    """
    if not system.concurrent_writers:
        pytest.skip(f"{system.name} allows no other writer")
    options = removing(system)
    target = system.new_target()
    system.put(target, OLD)
    attempt = pipeline.attempt()
    step = "sink.save_modes_decided" if options else "sink.before_decision"
    held = Zombie(step, str(tmp_path / "gate"), monkeypatch,
                  lambda: pipeline.open(attempt, system.sink(target, **options), spark).write(rows(spark, [1, 2]), 0))
    system.put(target, [500])
    assert "error" not in held.release()
    run = pipeline.open(pipeline.attempt(), system.sink(target, **options), spark)
    system.put(target, [501])
    run.write(rows(spark, [3]), 1)
    assert system.read(target) == sorted(([] if options else OLD) + [1, 2, 3, 500, 501])


def save_mode_cases():
    cases = []
    for name in SINKS:
        modes = {"LocalFile": LocalFileSystem(""), "Hive": HiveSystem(None), "Paimon": PaimonSystem(""),
                 "Iceberg": IcebergSystem(""), "PostgreSQL": JdbcSystem("PostgreSQL", ""), "MariaDB": JdbcSystem("MariaDB", ""),
                 "Redis": RedisSystem(None), "Http": HttpSystem(None)}[name].save_modes
        cases += [pytest.param(name, mode, id=f"{name}-{mode}") for mode in modes]
    return cases


@pytest.mark.parametrize("sink_name, mode", save_mode_cases())
def test_each_save_mode_does_what_it_says_once(spark, request, tmp_path, pipeline, sink_name, mode):
    """Purpose: each save-mode setting of the sink does what it says to rows already in a
    target, before the job's first rows, and never again once the job has written the target.

    How: a target with old rows, batch 0 under the mode; then a new attempt (a restart) writes
    batch 1. For a mode that refuses a target with rows: first an empty target (batch 0, then
    the restart), then one with old rows.
    Passing: "removes": the old rows are gone, the job's stay; "keeps": both are there;
    "refuses": a target with old rows fails the first batch with a permanent error naming the
    mode, and writes nothing; the job's own rows never make it refuse a restart.
    Requires: the sink's ``save_modes`` in its context.
    """
    system = make_system(sink_name, request, tmp_path)
    options, effect = system.save_modes[mode]
    target = system.new_target()
    if effect != "refuses":
        system.put(target, OLD)
    pipeline.open(pipeline.attempt(), system.sink(target, **options), spark).write(rows(spark, [1]), 0)
    pipeline.open(pipeline.attempt(), system.sink(target, **options), spark).write(rows(spark, [2]), 1)
    assert system.read(target) == sorted(([] if effect != "keeps" else OLD) + [1, 2])
    if effect == "refuses":
        refused = system.new_target()
        system.put(refused, OLD)
        other = Pipeline(pipeline.store, pipeline.workdir)
        with pytest.raises(PermanentError, match=mode):
            other.open(other.attempt(), system.sink(refused, **options), spark).write(rows(spark, [1]), 0)
        assert system.read(refused) == OLD
