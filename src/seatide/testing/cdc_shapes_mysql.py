"""MySQL shapes for the randomized CDC checks (issue 30, "Checks that reach these shapes").

    PYTHONPATH=src .venv/bin/python -m seatide.testing.cdc_shapes_mysql --seed 7 --transactions 200
                       [--merged] [--shards 3] [--statements 0.03] [--ddl 0.03] [--added-tables 0.05]

``cdc_check`` streams one table from a session that logs whole rows. This workload streams
several tables ("shards") through one MySQL-CDC source from sessions the seed sets up:

* most log rows with whole images (``binlog_row_image = FULL``); some with ``MINIMAL`` images,
  whose updates carry only the changed columns (the reader reads the others by key) and whose
  deletes only the key;
* a key moved between shards in one transaction (DELETE from one, INSERT into another), the
  shape that needs ``__row_seq`` comparable across tables when the shards merge into one target;
* now and then (``statements``: the share of transactions) a session with ``binlog_format =
  STATEMENT`` changing a shard, which the binlog then holds without rows; and, rarer, a shard
  truncated, or dropped and created again. The stream cannot carry these: the job must fail
  naming the table and the way out, and the check then takes it (empty the targets, start over).
  A statement-logged change of a table the job does not capture must pass unnoticed.
* the job follows schema changes (``schema-changes.enabled = true``); now and then (``ddl``) an
  ``ALTER TABLE ... ADD COLUMN`` of INT, VARCHAR(n) or DECIMAL(p, s), NOT NULL with a default,
  NULL-able with one or without; inserts name their columns, some added ones set, the others left
  to their default, and updates set added columns too. The server fills the rows it has with the
  default without a row event: the target must get the same definition. Merged shards get the
  same column, one shard after the other with no change between (``MySqlShapes``, why);
* now and then (``added_tables``) a shard created and the job resumed from its checkpoint with
  ``table-names`` listing it too, as a user's resume with a changed config does: its snapshot and
  changes must arrive once, in its target or the merged one, while the others go on from their
  offsets. Whether the resume check lets the checkpoint serve the changed config is asked as a
  driver asks it (``Pipeline.fits``): a refusal fails the check.

The shards go into the Jdbc sink on PostgreSQL, each into its own target or all into one
(``merged``). At the end every target must equal its source. The runtime's multi-table routing,
the sink protocol, the crash points and the query's restart with a table's new shape are
``cdc_shapes_pg_check``'s (``_Runner``).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import secrets
import shutil
import tempfile
from dataclasses import dataclass, field
from decimal import Decimal

from seatide.testing.cdc_check import Endpoint, mysql_endpoint, postgres_endpoint
from seatide.testing.cdc_shapes_pg import Shard, ShapesWorkload, until_equal
from seatide.testing.cdc_shapes_mysql_job import CAUGHT_UP, STREAM, job_text, resume_capturing, stream_state, table_rows
from seatide.testing.cdc_shapes_mysql_window import Rowless, start_in_window
from seatide.testing.cdc_shapes_pg_check import (ShapesOutcome, _Runner, _Scripted, restart_or_take_the_way_out,
                                                 write_while_streaming)

COLUMNS = "id BIGINT PRIMARY KEY, name VARCHAR(80), note TEXT, amount DECIMAL(20, 4)"
# Why a job may fail: SeaTide's refusals of a statement the binlog holds without rows (binlog.refuse_rowless),
# matched whole; the check then takes the way out the message names. A phrase alone ("was truncated")
# also took an error that quotes a statement or a table name holding it for a refusal.
GONE = tuple(re.compile(r"\[seatide:permanent\] MySQL-CDC: (?P<table>[\w.]+) " + head) for head in (
    r"(?P<reason>was truncated) after the job described it \(at binlog [^ ]+: .*\)\. "
    r"A TRUNCATE is logged as a statement without rows",
    r"(?P<reason>was dropped) after the job described it \(at binlog [^ ]+: .*\)\. Its rows went without a row event",
    r"was changed at binlog [^ ]+ by a statement (?P<reason>logged as text, without rows): "))
# A script's step that creates a shard and resumes the job capturing it too.
ADD_SHARD = "-- a shard added on resume"
ROW_IMAGE = {"full": "SET SESSION binlog_row_image = 'FULL'", "minimal": "SET SESSION binlog_row_image = 'MINIMAL'"}


@dataclass
class MySqlShard(Shard):
    added: list = field(default_factory=list)     # columns added by ALTER TABLE, in order (``Column``)
    charset: str = "utf8mb4"                      # a re-create in the window may take the other (latin1)


@dataclass(frozen=True)
class Column:
    """A column an ``ALTER TABLE ... ADD COLUMN`` gave a shard: its type (INT, VARCHAR(n) or
    DECIMAL(p, s)) and default (None: NULL-able without one)."""
    name: str
    kind: str
    size: tuple
    not_null: bool
    default: object

    def type_sql(self) -> str:
        return {"int": "INT", "varchar": "VARCHAR({})", "decimal": "DECIMAL({}, {})"}[self.kind].format(*self.size)

    def definition(self) -> str:
        default = "" if self.default is None else f" DEFAULT {self.literal(self.default)}"
        return f"{self.name} {self.type_sql()}{' NOT NULL' if self.not_null else ''}{default}"

    def literal(self, value) -> str:
        return f"'{value}'" if self.kind == "varchar" else format(value, "f") if self.kind == "decimal" else str(value)

    def value(self, rng: random.Random):
        """A value that fits the column (NULL now and then where it may hold one)."""
        if not self.not_null and rng.random() < 0.15:
            return None
        if self.kind == "int":
            return rng.randint(-10**6, 10**6)
        if self.kind == "varchar":
            return "v" * rng.randint(0, self.size[0] - 4) + str(rng.randint(100, 999))
        precision, scale = self.size
        whole = rng.randint(0, 10 ** (precision - scale) - 1) * rng.choice((1, -1))
        return Decimal(whole) + Decimal(rng.randint(0, 10 ** scale - 1)).scaleb(-scale)

    def normal(self, value):
        """A value as both databases' drivers give it, comparable."""
        if value is None:
            return None
        return {"int": int, "varchar": str, "decimal": lambda v: Decimal(str(v))}[self.kind](value)


class MySqlShapes(ShapesWorkload):
    """Seeded statements over ``shards`` tables and one table the job does not capture; the changes
    inside a transaction are ``ShapesWorkload``'s, the sessions and tables MySQL's.

    ``ddl`` (the share of transactions that are an ``ALTER TABLE ... ADD COLUMN``) and
    ``added_tables`` (the chance, after each few transactions, that the job is stopped and resumed
    capturing a new shard too) are drawn from ``evolution``, a generator apart from ``rng``, so a seed
    without them draws what it drew before they existed. ``merged``: the shards share one target,
    so a column is added to every shard by the same statement, one after the other with no change
    in between (sharded tables evolve together): the merged target has one shape, and a shard's
    rows never reach it with another shard's columns half defined (which of the target's
    defaults, or NULL, a shard without the column would mean is not defined)."""

    def __init__(self, rng: random.Random, shards: int = 3, statements: float = 0.03, drops: float = 0.01, *,
                 evolution: random.Random | None = None, ddl: float = 0.0, added_tables: float = 0.0,
                 merged: bool = False):
        self.rng, self.statements, self.drops = rng, statements, drops
        self.evolution, self.ddl, self.added_tables = evolution or random.Random(0), ddl, added_tables
        self.merged = merged
        self.shards = [MySqlShard(f"shard_{i}", "full") for i in range(shards)]
        self.next_id, self.next_column = 1, 1
        self.rowless = Rowless()        # the changes made that the stream must refuse (a way out's)

    def create(self, shard: MySqlShard, rows: int = 10) -> list:
        """(Re)create ``shard`` with the columns it has now (added ones too: a shard created again
        keeps its group's shape) and ``rows`` rows."""
        shard.live.clear()
        added = "".join(f", {c.definition()}" for c in shard.added)
        return [f"DROP TABLE IF EXISTS {shard.name}",
                f"CREATE TABLE {shard.name} ({COLUMNS}{added}) CHARACTER SET {shard.charset}",
                *[self.insert(shard) for _ in range(rows)]]

    def setup(self) -> list:
        return ["CREATE TABLE uncaptured (id BIGINT PRIMARY KEY, name VARCHAR(80))",
                *[s for shard in self.shards for s in self.create(shard)]]

    def add_shard(self) -> list:
        """A new shard (with the others' added columns where they share a target), for a resume
        whose config captures it."""
        shard = MySqlShard(f"shard_{len(self.shards)}", "full")
        if self.merged:
            shard.added = list(self.shards[0].added)
        self.shards.append(shard)
        return self.create(shard, rows=self.evolution.randint(0, 12))

    def insert(self, shard: MySqlShard, key: int | None = None) -> tuple[str, tuple]:
        """An insert naming its columns: a random part of the added ones, the others left to their default."""
        if key is None:
            key, self.next_id = self.next_id, self.next_id + 1
        shard.live.add(key)
        rng = self.rng
        note = None if rng.random() < 0.1 else "n" * rng.choice([3, 200, 3000])
        named = [c for c in shard.added if self.evolution.random() < 0.5]
        columns = ", ".join(["id", "name", "note", "amount", *[c.name for c in named]])
        return (f"INSERT INTO {shard.name} ({columns}) VALUES ({', '.join(['%s'] * (4 + len(named)))})",
                (key, f"nam\u00e9 {rng.randint(0, 10**6)}", note, f"{rng.randint(-10**6, 10**6)}.25",
                 *[c.value(self.evolution) for c in named]))

    def transaction(self) -> list:
        """One session's transaction: its settings first, then its statements."""
        rng, removal = self.rng, self.removal()
        if removal is not None:
            truncated = removal[0].startswith("TRUNCATE")      # else ["BEGIN", "DROP TABLE IF EXISTS t", ...]
            self.rowless.made_change(removal[0 if truncated else 1].split()[-1],
                                     "was truncated" if truncated else "was dropped")
            return removal
        if self.ddl and self.evolution.random() < self.ddl:
            return self.add_column()
        if rng.random() < self.statements:
            shard = rng.choice(self.shards)
            session = ["SET SESSION binlog_format = 'STATEMENT'"]
            self.rowless.made_change(shard.name, "logged as text, without rows")
            if not shard.live or rng.random() < 0.5:
                return [*session, self.insert(shard)]
            return [*session, self.update(shard, 0.3)]
        session = [ROW_IMAGE["minimal" if rng.random() < 0.4 else "full"]]
        if rng.random() < 0.05:     # statements logged as text for a table the job does not read
            session += ["SET SESSION binlog_format = 'STATEMENT'",
                        ("REPLACE INTO uncaptured VALUES (%s, %s)", (rng.randint(1, 50), "x"))]
            session.append("SET SESSION binlog_format = 'ROW'")
        statements = self.changes()
        return [*session, "BEGIN", *statements, "COMMIT"]

    def add_column(self, column: Column | None = None) -> list:
        """``ALTER TABLE ... ADD COLUMN`` of one shard drawn (``shard_0`` for a given ``column``), of
        every shard merged: ``column``, or one drawn: INT, VARCHAR(n) or DECIMAL(p, s), NOT NULL with a
        default, NULL-able with one, or NULL-able without."""
        draw = self.evolution
        shards = self.shards if self.merged else [draw.choice(self.shards) if column is None else self.shards[0]]
        if column is None:
            kind = draw.choice(("int", "varchar", "decimal"))
            size = {"int": (), "varchar": (draw.choice((8, 40)),),
                    "decimal": draw.choice(((10, 2), (20, 4), (6, 0)))}[kind]
            column, shape = Column(f"c{self.next_column}", kind, size, False, None), draw.random()
            self.next_column += 1
            if shape < 0.8:         # with a default, NOT NULL or not: the server fills the rows it has
                column = Column(column.name, kind, size, shape < 0.5, column.value(random.Random(draw.random())) or 0)
        for shard in shards:
            shard.added.append(column)
        return [f"ALTER TABLE {shard.name} ADD COLUMN {column.definition()}" for shard in shards]

    def update(self, shard: MySqlShard, choice: float) -> tuple[str, tuple]:
        """One column changed: a MINIMAL image leaves the others out (read by key); now and then an
        added column (set, or to NULL where it may be)."""
        name = f"seen {self.rng.random()}"
        key = self.rng.choice(sorted(shard.live))
        if shard.added and self.evolution.random() < 0.4:
            column = self.evolution.choice(shard.added)
            return f"UPDATE {shard.name} SET {column.name} = %s WHERE id = %s", (column.value(self.evolution), key)
        return f"UPDATE {shard.name} SET name = %s WHERE id = %s", (name, key)


def run_mysql_shapes(spark, admin: Endpoint, target: Endpoint, *, seed: int, transactions: int, workdir: str,
                     merged: bool = False, shards: int = 3, statements: float = 0.03, ddl: float = 0.0,
                     added_tables: float = 0.0, window: float = 0.0, script: list | None = None,
                     crashes: tuple | None = None, deadline_s: float = 300.0) -> ShapesOutcome:
    """Run the seeded workload (or, with ``script``, those transactions after the shards of
    ``shards`` are made, each then checked) on a fresh database of ``admin``'s server into
    ``target``; AssertionError unless every target ends equal to its source. Crash points come from
    a seeded draw, or, given ``crashes``, in that order (the n-th batch meets the n-th). In a
    script, a step ``[ADD_SHARD]`` creates a shard and resumes the job capturing it, and a
    ``Column`` is added (``MySqlShapes.add_column``). ``window``: the chance that a fresh start (the
    first, a way out's, or one drawn after each few transactions) has a change made between the
    tables' description and the first batch (cdc_shapes_mysql_window.py)."""
    rng = random.Random(seed)
    workload = MySqlShapes(rng, shards, statements, evolution=random.Random(seed + 2), ddl=ddl,
                           added_tables=added_tables, merged=merged)
    database = f"shapes_{seed}_{secrets.token_hex(3)}"
    admin.execute(f"CREATE DATABASE {database}")
    source = mysql_endpoint(int(admin.url.rsplit(":", 1)[1].split("/")[0]), database)
    source.execute(*workload.setup())
    table, server_id = f"shapes_{seed}_{secrets.token_hex(3)}", 5600 + secrets.randbelow(300)
    outcome = ShapesOutcome(seed)
    chooser = _Scripted(list(crashes)) if crashes is not None else random.Random(seed + 1)
    runner = _Runner(spark, job_text(source, target, workload.shards, table, merged, server_id),
                     f"shm{secrets.token_hex(3)}", workdir, chooser, outcome, holds_rows=lambda end: True)

    def targets() -> dict:
        """Each target and the columns it must have (merged: the shards' shared shape)."""
        if merged:
            return {table: workload.shards[0].added}
        return {f"{table}_{s.name}": s.added for s in workload.shards}

    windows, fresh = random.Random(seed + 3), [runner.lineage]

    def start():
        """The query started; a fresh start (a new lineage) now and then with a change in its window."""
        if fresh[0] == runner.lineage or len(workload.shards) < 2 or windows.random() >= window:
            fresh[0] = runner.lineage
            return runner.start()
        fresh[0] = runner.lineage
        query, kind = start_in_window(runner.start, runner.conf, source, workload, windows)
        outcome.window_changes.append(kind)
        return query

    def empty_targets():
        target.execute(*[f"DROP TABLE IF EXISTS {name}" for name in targets()])

    def restart_if_dead():
        if not running[0].isActive:
            workload.rowless.check(str(running[0].exception() or ""), GONE, seed)
        restart_or_take_the_way_out(running, runner, GONE, empty_targets, start)

    def add_shard():
        restart_if_dead()
        source.execute(*workload.add_shard())
        resume_capturing(runner, running, job_text(source, target, workload.shards, table, merged, server_id),
                         outcome)

    def between():
        if workload.added_tables and workload.evolution.random() < workload.added_tables:
            add_shard()
        if window and windows.random() < window / 4:        # the job submitted again: a fresh start
            restart_if_dead()
            running[0].stop()
            empty_targets()
            runner.start_over()
            workload.rowless.made.clear()
            running[0] = start()

    def rows():
        try:
            got = {name: table_rows(target, name, added) for name, added in targets().items()}
        except Exception:  # noqa: BLE001 - the sink has not created a target (or a column) yet
            got = None
        shard_rows = {s.name: table_rows(source, s.name, s.added) for s in workload.shards}
        expected = ({table: {k: v for r in shard_rows.values() for k, v in r.items()}} if merged
                    else {f"{table}_{name}": r for name, r in shard_rows.items()})
        # equal is not done: the stream must also have read to the binlog's end and be running, so a
        # job failing on a statement that changes no compared value fails the check
        state = {"state": stream_state(running[0], source)}
        return ({**got, STREAM: state} if got is not None else None), {**expected, STREAM: {"state": CAUGHT_UP}}

    fresh[0] = -1
    running = [start()]
    try:
        if script is not None:
            for step, transaction in enumerate([[], *script]):
                if transaction == [ADD_SHARD]:
                    add_shard()
                else:
                    source.execute(*(workload.add_column(transaction) if isinstance(transaction, Column)
                                     else transaction))
                until_equal(rows, deadline_s, f"step {step} ({outcome})", restart_if_dead)
            return outcome
        write_while_streaming(workload, source, outcome, rng, transactions, deadline_s, restart_if_dead, between)
        until_equal(rows, deadline_s, f"seed {seed} ({outcome})", restart_if_dead)
        return outcome
    finally:
        running[0].stop()
        for name in targets():
            target.execute(f"DROP TABLE IF EXISTS {name}")
        admin.execute(f"DROP DATABASE IF EXISTS {database}")
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--transactions", type=int, default=200)
    parser.add_argument("--merged", action="store_true", help="every shard into one target table")
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--statements", type=float, default=0.03,
                        help="share of transactions from a session with binlog_format = STATEMENT")
    parser.add_argument("--ddl", type=float, default=0.03, help="share of transactions that add a column")
    parser.add_argument("--added-tables", type=float, default=0.05,
                        help="chance, after each few transactions, of a shard added on resume")
    parser.add_argument("--window", type=float, default=0.0,
                        help="chance that a fresh start has a change between the description and the first batch")
    args = parser.parse_args()
    from seatide.runtime.session import build_session
    from seatide.testing.servers import start_private_mariadb, stop_private_mariadb

    workdir = tempfile.mkdtemp(prefix="cdc-shapes-mysql-")
    os.makedirs(os.path.join(workdir, "server"))
    server, process = start_private_mariadb(os.path.join(workdir, "server"))
    spark = build_session("seatide-cdc-shapes-mysql", {"spark.master": "local[2]"})
    try:
        outcome = run_mysql_shapes(spark, mysql_endpoint(server.port, "test"), postgres_endpoint(5432, "test"),
                                   seed=args.seed, transactions=args.transactions, merged=args.merged,
                                   shards=args.shards, statements=args.statements, ddl=args.ddl,
                                   added_tables=args.added_tables, window=args.window,
                                   workdir=os.path.join(workdir, "run"))
        print(f"mysql shapes -> postgres ({'merged' if args.merged else 'a target each'}): targets equal "
              f"sources; {outcome}", flush=True)
    finally:
        spark.stop()
        stop_private_mariadb(process)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
