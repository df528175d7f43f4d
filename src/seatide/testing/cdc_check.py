"""A randomized check that change data capture never loses or corrupts a change.

    PYTHONPATH=src .venv/bin/python -m seatide.testing.cdc_check --seed 7 --transactions 300
                       [--source postgres,mysql] [--sink upsert,plain]

A seeded generator writes transactions to a source table on a private server (PostgreSQL
with ``wal_level = logical``, MariaDB with a row binlog): inserts, updates of values (some
leaving a large TOASTed value unchanged), updates of the key, deletes, now and then a
TRUNCATE, large values and numerics at the edges of decimal(38, 18). Meanwhile the real
CDC source streams into the real Jdbc sink (the other database, ``enable_upsert`` true or
false) through the runtime's exactly-once protocol (``write_exactly_once``), one
SparkSession, micro-batches of at most a few dozen rows. Crashes are injected at points the
seed picks: before a batch is written, inside the sink right before its database commit,
and after the database commit but before the runtime and Spark recorded it. The query then
dies and is started again from its checkpoint, as a job retry does. A TRUNCATE must fail
the stream loudly; the check then takes the documented way out (empty the target, start
from a fresh checkpoint). At the end the target must equal the source, row for row.

``run_check`` is what the tests call (a short fixed-seed run in CI, a longer one marked
``soak``); ``main`` runs it against private servers of its own.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import secrets
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Context, Decimal

EDGE_NUMERICS = ["0", "12345678901.5", "99999999999999999999.999999999999999999",
                 "-99999999999999999999.999999999999999999", "0.000000000000000001", "-1", "1E+10"]


_EXACT = Context(prec=60)


class InjectedCrash(RuntimeError):
    """Raised at a crash point the seed picked (the query dies with it)."""


@dataclass
class Workload:
    """Seeded source transactions; ``live`` is the set of ids the source holds."""

    rng: random.Random
    live: set = field(default_factory=set)
    next_id: int = 1

    def value(self) -> tuple[str, Decimal, str]:
        rng = self.rng
        amount = Decimal(rng.choice(EDGE_NUMERICS) if rng.random() < 0.4
                         else f"{rng.randint(-10**9, 10**9)}.{rng.randint(0, 10**18 - 1):018d}")
        body = secrets.token_hex(rng.choice([4, 8, 5000])) if rng.random() < 0.9 else None   # 10 KB: TOASTed
        return f"name {rng.randint(0, 10**6)}", amount, body

    def insert(self) -> tuple[str, tuple]:
        key, self.next_id = self.next_id, self.next_id + 1
        self.live.add(key)
        return "INSERT INTO items VALUES (%s, %s, %s, %s)", (key, *self.value())

    def transaction(self) -> list[tuple[str, tuple]]:
        """One source transaction: 1-5 statements (a TRUNCATE stands alone)."""
        rng = self.rng
        if self.live and rng.random() < 0.03:
            self.live.clear()
            return [("TRUNCATE items", ())]
        statements = []
        for _ in range(rng.randint(1, 5)):
            choice = rng.random()
            if not self.live or choice < 0.35:
                statements.append(self.insert())
            elif choice < 0.65:
                key = rng.choice(sorted(self.live))
                name, amount, _ = self.value()
                if rng.random() < 0.5:     # the large value is left unchanged (TOAST 'u' on PostgreSQL)
                    statements.append(("UPDATE items SET name = %s, amount = %s WHERE id = %s", (name, amount, key)))
                else:
                    statements.append(("UPDATE items SET body = %s WHERE id = %s", (self.value()[2], key)))
            elif choice < 0.8:
                old, new = rng.choice(sorted(self.live)), self.next_id
                self.next_id += 1
                self.live.discard(old)
                self.live.add(new)
                statements.append(("UPDATE items SET id = %s WHERE id = %s", (new, old)))
            else:
                key = rng.choice(sorted(self.live))
                self.live.discard(key)
                statements.append(("DELETE FROM items WHERE id = %s", (key,)))
        return statements


@dataclass
class Endpoint:
    """A table on a server: how to connect, create it and read it back."""

    kind: str                    # "postgres" or "mysql"
    url: str                     # JDBC URL of the database
    user: str
    connect: object              # () -> DB-API connection with autocommit

    def rows(self, table: str) -> dict:
        conn = self.connect()
        try:
            cursor = conn.cursor()
            cursor.execute(f"SELECT id, name, amount, body FROM {table}")
            return {int(r[0]): (r[1], None if r[2] is None else _EXACT.quantize(Decimal(r[2]), Decimal("1E-18")), r[3])
                    for r in cursor.fetchall()}
        finally:
            conn.close()

    def execute(self, *statements) -> None:
        conn = self.connect()
        try:
            cursor = conn.cursor()
            for statement in statements:
                sql, params = statement if isinstance(statement, tuple) else (statement, ())
                cursor.execute(sql, params or None)
            if self.kind == "mysql":
                conn.commit()
        finally:
            conn.close()


SOURCE_DDL = {
    "postgres": "CREATE TABLE items (id bigint PRIMARY KEY, name varchar(80), amount numeric(38, 18), body text)",
    "mysql": "CREATE TABLE items (id bigint PRIMARY KEY, name varchar(80), amount decimal(38, 18), body mediumtext) "
             "DEFAULT CHARSET = utf8mb4",
}


@dataclass
class Outcome:
    seed: int
    transactions: int
    statements: int
    crashes: int
    truncates: int
    batches: int
    rows: int


def run_check(spark, source: Endpoint, target: Endpoint, *, upsert: bool, seed: int, transactions: int,
              workdir: str, deadline_s: float = 300.0) -> Outcome:
    """Run the workload against ``source`` streaming into ``target``; raise AssertionError unless
    the target ends equal to the source. ``source`` holds a fresh ``items`` table afterwards."""
    from seatide.config.loader import load_job_text
    from seatide.connectors.jdbc.sink import JdbcSink
    from seatide.plugin.base import ReadContext, SinkContext
    from seatide.plugin.options import read_options
    from seatide.plugin.sink_protocol import open_sink
    from seatide.runtime.commit_log import FileDecisions, SinkCommitLog, write_exactly_once

    rng, crashes = random.Random(seed), random.Random(seed + 1)   # the batch thread draws its own
    workload = Workload(rng)
    table = f"cdc_check_{seed}_{secrets.token_hex(3)}"
    job_id = f"chk{secrets.token_hex(3)}"
    source.execute("DROP TABLE IF EXISTS items", SOURCE_DDL[source.kind],
                   *[workload.insert() for _ in range(20)])                 # rows for the snapshot
    target.execute(f"DROP TABLE IF EXISTS {table}")
    name = "Postgres-CDC" if source.kind == "postgres" else "MySQL-CDC"
    tables = f'"{source.url.rsplit("/", 1)[1]}.public.items"' if source.kind == "postgres" \
        else f'"{source.url.rsplit("/", 1)[1]}.items"'
    extra = "server-id = 5499" if source.kind == "mysql" else ""
    plugin = load_job_text(
        f'env {{ job.mode = "STREAMING" }}\nsource {{ {name} {{ base-url = "{source.url}", username = "{source.user}", '
        f'password = "", table-names = [{tables}], snapshot.split.size = 7\n{extra} }} }}\nsink {{ Console {{}} }}'
    ).sources[0].plugin
    sink = JdbcSink(read_options({"url": target.url, "user": target.user, "table": table, "primary_keys": ["id"],
                                  "enable_upsert": upsert}, JdbcSink.options))
    outcome = Outcome(seed, 0, 0, 0, 0, 0, 0)
    state = {"lineage": 0, "fence_calls": 0, "crash": None}

    class Decisions(FileDecisions):
        def fence(self) -> None:        # called inside the sink before its commit, then after it
            state["fence_calls"] += 1
            if state["crash"] == ("before_commit", 1) and state["fence_calls"] == 1 \
                    or state["crash"] == ("after_commit", 2) and state["fence_calls"] == 2:
                outcome.crashes += 1
                raise InjectedCrash(f"injected crash {state['crash'][0]}")

    def start():
        checkpoint = os.path.join(workdir, f"{job_id}-{state['lineage']}")
        ctx = ReadContext(spark, micro_batch=True, unbounded=True, parallelism=2, max_rows_per_batch=40,
                          read_interval_ms=200, plugin_id="source[0]", job_id=job_id, pipeline_id=0)
        writer = open_sink(sink, SinkContext(spark=spark, job_id=job_id, pipeline_id=0, plugin_id="sink[0]",
                                         micro_batch=True, unbounded=True, stdout=io.StringIO()))
        log = SinkCommitLog(os.path.join(checkpoint, "sink"))

        def each_batch(df, batch_id):
            point = crashes.choice(["before_write", ("before_commit", 1), ("after_commit", 2)] + [None] * 9)
            state["crash"], state["fence_calls"] = point, 0
            if point == "before_write":
                outcome.crashes += 1
                raise InjectedCrash("injected crash before_write")
            result = write_exactly_once(writer, log, df, batch_id,
                                        f"T_{job_id}_0_0_L{state['lineage']}_{batch_id}", decisions=Decisions(log))
            outcome.batches += 1
            outcome.rows += int(result.state.get("rows", 0)) if not result.replayed else 0

        return (plugin.read(ctx).writeStream.foreachBatch(each_batch).option("checkpointLocation", checkpoint)
                .trigger(processingTime="200 milliseconds").start())

    def restart_if_dead(query):
        if query.isActive:
            return query
        error = str(query.exception() or "")
        query.stop()
        if "injected crash" in error:
            return start()
        if "was truncated" in error:        # the documented way out: empty the target, start fresh
            outcome.truncates += 1
            target.execute(f"DELETE FROM {table}")
            state["lineage"] += 1
            return start()
        raise AssertionError(f"the CDC stream failed (seed {seed}): {error[-3000:]}")

    def wait_for_a_batch(query, after: int):
        """Poll until a batch beyond ``after`` was written (restarting a crashed query)."""
        deadline = time.monotonic() + deadline_s
        while outcome.batches <= after:
            query = restart_if_dead(query)
            if time.monotonic() > deadline:
                raise AssertionError(f"seed {seed}: no batch written for {deadline_s} s ({outcome})")
            time.sleep(0.05)
        return query

    query = wait_for_a_batch(start(), 0)          # the snapshot first, then changes while it streams
    try:
        while outcome.transactions < transactions:
            written = outcome.batches
            for _ in range(min(rng.randint(1, 8), transactions - outcome.transactions)):
                statements = workload.transaction()
                source.execute(*([("BEGIN", ()), *statements, ("COMMIT", ())] if len(statements) > 1 else statements))
                outcome.transactions += 1
                outcome.statements += len(statements)
            query = wait_for_a_batch(query, written)
        deadline = time.monotonic() + deadline_s
        expected = source.rows("items")
        while True:
            query = restart_if_dead(query)
            try:
                got = target.rows(table)
            except Exception:   # the sink has not created the table yet
                got = None
            if got == expected:
                return outcome
            if time.monotonic() > deadline:
                raise AssertionError(f"seed {seed}: the target differs from the source after {deadline_s} s: "
                                     f"{_difference(got or {}, expected)} ({outcome})")
            time.sleep(0.2)
    finally:
        query.stop()
        target.execute(f"DROP TABLE IF EXISTS {table}")
        try:
            plugin.release(job_id) if source.kind == "postgres" else None
        except Exception:
            pass
        shutil.rmtree(workdir, ignore_errors=True)


def _difference(got: dict, expected: dict) -> str:
    keys = sorted(k for k in {*got, *expected} if got.get(k) != expected.get(k))
    return f"{len(keys)} rows differ, e.g. " + "; ".join(
        f"id {k}: target {str(got.get(k))[:80]} source {str(expected.get(k))[:80]}" for k in keys[:3])


def postgres_endpoint(port: int, database: str) -> Endpoint:
    import psycopg

    return Endpoint("postgres", f"jdbc:postgresql://127.0.0.1:{port}/{database}", "postgres",
                    lambda: psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname=database,
                                            autocommit=True))


def mysql_endpoint(port: int, database: str) -> Endpoint:
    import pymysql

    return Endpoint("mysql", f"jdbc:mariadb://127.0.0.1:{port}/{database}", "root",
                    lambda: pymysql.connect(host="127.0.0.1", port=port, user="root", password="",
                                            database=database, autocommit=True,
                                            ssl_disabled=True))   # no TLS context per connect (servers.py)


@contextmanager
def check_endpoints():
    """For each source kind, (source on a private server of its own, target on the machine's
    shared server of the other kind), as the tests pair them; the private servers stop after."""
    from seatide.testing.servers import PrivatePostgres, start_private_mariadb, stop_private_mariadb

    postgres = PrivatePostgres().start()
    mariadb_dir = tempfile.mkdtemp(prefix="seatide-cdc-check-")
    process = None
    try:
        mariadb, process = start_private_mariadb(mariadb_dir)
        yield {"postgres": (postgres_endpoint(postgres.port, "postgres"), mysql_endpoint(3306, "test")),
               "mysql": (mysql_endpoint(mariadb.port, "test"), postgres_endpoint(5432, "test"))}
    finally:
        if process is not None:
            stop_private_mariadb(process)
        shutil.rmtree(mariadb_dir, ignore_errors=True)
        postgres.stop()


def arguments(doc: str, transactions: int) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--transactions", type=int, default=transactions)
    parser.add_argument("--source", default="postgres,mysql")
    parser.add_argument("--sink", default="upsert,plain")
    return parser


def main() -> None:
    args = arguments(__doc__, 300).parse_args()
    from seatide.runtime.session import build_session

    spark = build_session("seatide-cdc-check", {"spark.master": "local[2]"})
    try:
        with check_endpoints() as endpoints:
            for kind in args.source.split(","):
                for mode in args.sink.split(","):
                    source, target = endpoints[kind]
                    outcome = run_check(spark, source, target, upsert=mode == "upsert", seed=args.seed,
                                        transactions=args.transactions, workdir=tempfile.mkdtemp(prefix="cdc-check-"))
                    print(f"{kind} -> {target.kind}, {mode}: target equals source; {outcome}", flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
