"""PostgreSQL shapes for the randomized CDC checks (issue 30, "Checks that reach these shapes").

    PYTHONPATH=src .venv/bin/python -m seatide.testing.cdc_shapes_pg --seed 7 --transactions 200
                       [--merged] [--megabytes 0.05] [--shards 3]

``cdc_check`` streams one table. This workload streams several tables ("shards") through one
Postgres-CDC source, each created with a replica identity the seed draws (DEFAULT: the primary
key; USING INDEX: a unique index on a table without a primary key; FULL), and writes:

* inserts, updates that leave the jsonb document alone (under DEFAULT or INDEX pgoutput then
  leaves a TOASTed document out, and the reader reads it by key), updates of the document and of
  the key, deletes;
* a key moved between shards in one transaction (DELETE from one, INSERT into another);
* documents of about a megabyte now and then (``megabytes``: the share of documents that are);
* now and then a shard dropped and created again, or truncated, which the stream cannot carry:
  the job must fail naming it, and the check then takes the way out it names (empty the targets,
  start over);
* with some seeds, a shard whose ``primaryKeys`` lie outside its identity: the job must refuse to
  start, naming the way out (REPLICA IDENTITY FULL), which the check takes.

The shards go into the Jdbc sink on PostgreSQL, each into its own target, or all into one
(``merged``: shards of one table). At the end every target must equal its source.
``run_shapes_check`` drives the real source, the runtime's multi-table routing
(``RoutedPipeline``) and the Jdbc sink through ``write_exactly_once`` in one SparkSession, with
crashes injected as ``cdc_check`` does; ``cdc_shapes_pg_job`` runs the same workload as a
`seatide run` job whose driver is SIGKILLed.
"""

from __future__ import annotations

import random
import secrets
import time
from dataclasses import dataclass, field
from decimal import Decimal

from seatide.testing.cdc_check import Endpoint, postgres_endpoint

COLUMNS = "id bigint NOT NULL, name text, doc jsonb, amount numeric(20, 4)"
IDENTITIES = ("default", "index", "full")
# A document of about a megabyte, made by the server from a seed (nothing that large crosses
# from the check to the server): 32,768 md5 digests.
MEGABYTE_DOC = ("(SELECT jsonb_build_object('seed', %s::text, 'pad', string_agg(md5(p.n::text || %s::text), '')) "
                "FROM generate_series(1, 32768) AS p(n))")
# A document TOASTed out of line (about 13 KB), so that an update leaving it alone leaves it out.
LARGE_DOC = ("(SELECT jsonb_build_object('seed', %s::text, 'pad', string_agg(md5(p.n::text || %s::text), '')) "
             "FROM generate_series(1, 400) AS p(n))")
# Why a job may fail, and the check then takes the way out the message names.
GONE = ("was truncated", "dropped and created again", "was dropped")
REFUSED = "replica identity logs only"


@dataclass
class Shard:
    name: str
    identity: str                      # default | index | full
    misfit: bool = False               # primaryKeys outside the identity: refused until FULL
    live: set = field(default_factory=set)


class ShapesWorkload:
    """Seeded statements over ``shards`` tables; ``Shard.live`` are the ids each holds."""

    def __init__(self, rng: random.Random, shards: int = 3, megabytes: float = 0.02, drops: float = 0.01):
        self.rng, self.megabytes, self.drops = rng, megabytes, drops
        self.shards = [Shard(f"shard_{i}", rng.choice(IDENTITIES)) for i in range(shards)]
        if rng.random() < 0.3:
            self.shards[0].identity, self.shards[0].misfit = "default", True
        self.next_id = 1

    def create(self, shard: Shard, rows: int = 10) -> list:
        """(Re)create ``shard`` with its identity and ``rows`` rows."""
        name = shard.name
        key = "" if shard.identity == "index" else ", PRIMARY KEY (id)"
        statements = [f"DROP TABLE IF EXISTS {name}", f"CREATE TABLE {name} ({COLUMNS}{key})"]
        if shard.identity == "index":
            statements += [f"CREATE UNIQUE INDEX {name}_id ON {name} (id)",
                           f"ALTER TABLE {name} REPLICA IDENTITY USING INDEX {name}_id"]
        elif shard.identity == "full":
            statements.append(f"ALTER TABLE {name} REPLICA IDENTITY FULL")
        shard.live.clear()
        return statements + [self.insert(shard) for _ in range(rows)]

    def setup(self) -> list:
        return [s for shard in self.shards for s in self.create(shard)]

    def document(self) -> tuple[str, tuple]:
        """SQL for a document, and its parameters: small, TOASTed, or about a megabyte."""
        seed, draw = str(self.rng.getrandbits(48)), self.rng.random()
        if draw < self.megabytes:
            return MEGABYTE_DOC, (seed, seed)
        if draw < 0.3:
            return LARGE_DOC, (seed, seed)
        return "%s::jsonb", (f'{{"seed": "{seed}", "tags": [1, 2, {self.rng.randint(0, 9)}]}}',)

    def insert(self, shard: Shard, key: int | None = None) -> tuple[str, tuple]:
        if key is None:
            key, self.next_id = self.next_id, self.next_id + 1
        shard.live.add(key)
        doc, params = self.document()
        return (f"INSERT INTO {shard.name} VALUES (%s, %s, {doc}, %s)",
                (key, f"name {self.rng.randint(0, 10**6)}", *params, f"{self.rng.randint(-10**6, 10**6)}.25"))

    def transaction(self) -> list:
        """One source transaction; a DROP and CREATE or a TRUNCATE stands alone."""
        removal = self.removal()
        if removal is not None:
            return removal
        statements = self.changes()
        return ["BEGIN", *statements, "COMMIT"] if len(statements) > 1 else statements

    def removal(self) -> list | None:
        """Now and then (``drops``) a shard truncated, or dropped and created again, alone in its
        transaction; None the other times."""
        rng = self.rng
        if rng.random() >= self.drops:
            return None
        shard = rng.choice(self.shards)
        if rng.random() < 0.5:
            shard.live.clear()
            return [f"TRUNCATE {shard.name}"]
        return ["BEGIN", *self.create(shard, rows=3), "COMMIT"]

    def changes(self) -> list:
        """One to four changes of random shards: inserts, updates of values (``update``) and of
        the key, keys moved to another shard, deletes."""
        rng, statements = self.rng, []
        for _ in range(rng.randint(1, 4)):
            shard = rng.choice(self.shards)
            choice = rng.random()
            if not shard.live or choice < 0.3:
                statements.append(self.insert(shard))
            elif choice < 0.6:
                statements.append(self.update(shard, choice))
            elif choice < 0.7:
                old, new = rng.choice(sorted(shard.live)), self.next_id
                self.next_id += 1
                shard.live.discard(old)
                shard.live.add(new)
                statements.append((f"UPDATE {shard.name} SET id = %s WHERE id = %s", (new, old)))
            elif choice < 0.85:              # a key moved to another shard, in this transaction
                key = rng.choice(sorted(shard.live))
                other = rng.choice([s for s in self.shards if s is not shard])
                shard.live.discard(key)
                statements += [(f"DELETE FROM {shard.name} WHERE id = %s", (key,)), self.insert(other, key)]
            else:
                key = rng.choice(sorted(shard.live))
                shard.live.discard(key)
                statements.append((f"DELETE FROM {shard.name} WHERE id = %s", (key,)))
        return statements

    def update(self, shard: Shard, choice: float) -> tuple[str, tuple]:
        """An update of a row's values (``choice`` in [0.3, 0.6) picks which)."""
        rng = self.rng
        if choice < 0.5:                     # the document left alone: read by key under DEFAULT / INDEX
            key = rng.choice(sorted(shard.live))
            return f"UPDATE {shard.name} SET name = %s WHERE id = %s", (f"seen {rng.random()}", key)
        doc, params = self.document()
        return f"UPDATE {shard.name} SET doc = {doc} WHERE id = %s", (*params, rng.choice(sorted(shard.live)))


def job_text(source_url: str, target_url: str, shards: list[Shard], target: str, merged: bool,
             sink_options: str = "") -> str:
    """A STREAMING job: every shard through one Postgres-CDC source into the Jdbc sink (with
    ``sink_options`` too)."""
    database = source_url.rsplit("/", 1)[1]
    names = ", ".join(f'"{database}.public.{s.name}"' for s in shards)
    keys = [f'{{ table = "{database}.public.{s.name}", primaryKeys = ["id", "amount"] }}' for s in shards if s.misfit]
    config = f"table-names-config = [{', '.join(keys)}]" if keys else ""
    table = target if merged else f"{target}_${{table_name}}"
    return (f'env {{ job.mode = "STREAMING", checkpoint.interval = 1000, micro-batch.max-rows = 60,\n'
            f'      job.retry.times = 100, job.retry.interval.seconds = 1 }}\n'
            f'source {{ Postgres-CDC {{ base-url = "{source_url}", username = "postgres", password = "",\n'
            f'  table-names = [{names}], snapshot.split.size = 7\n  {config} }} }}\n'
            f'sink {{ Jdbc {{ url = "{target_url}", user = "postgres", password = "", table = "{table}",\n'
            f'  primary_keys = ["id"], enable_upsert = true\n  {sink_options} }} }}\n')


def source_rows(source, shards: list[Shard], merged: bool) -> dict:
    """Each shard's rows (id -> (name, document's md5, amount)) by shard name, or all of them
    under "merged"."""
    rows = {s.name: _rows(source, s.name) for s in shards}
    return {"merged": {k: v for r in rows.values() for k, v in r.items()}} if merged else rows


def target_rows(target, shards: list[Shard], table: str, merged: bool) -> dict | None:
    """The targets' rows as ``source_rows`` gives the source's; None while one does not exist."""
    try:
        if merged:
            return {"merged": _rows(target, table)}
        return {s.name: _rows(target, f"{table}_{s.name}") for s in shards}
    except Exception:  # noqa: BLE001 - the sink has not created it yet
        return None


def _rows(endpoint, table: str) -> dict:
    conn = endpoint.connect()
    try:
        cursor = conn.cursor()
        # the document's digest: rows of megabytes are compared without holding them
        cursor.execute(f"SELECT id, name, md5(doc::text), amount::text FROM {table}")
        return {int(r[0]): (r[1], r[2], None if r[3] is None else Decimal(r[3])) for r in cursor.fetchall()}
    finally:
        conn.close()


def until_equal(rows, deadline_s: float, what: str, tick=lambda: None) -> None:
    """Poll ``rows()`` (the targets' rows, the sources') until they are equal, ``tick()`` first in
    each round (it starts a stopped query again, takes a way out...); AssertionError at the deadline."""
    deadline = time.monotonic() + deadline_s
    while True:
        tick()
        got, expected = rows()
        if got == expected:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: the targets differ from the sources after {deadline_s} s: "
                                 f"{differences(got, expected)}")
        time.sleep(0.2)


def differences(got: dict | None, expected: dict) -> str:
    if got is None:
        return "the targets do not exist yet"
    parts = []
    for name in sorted({*got, *expected}):
        have, want = got.get(name, {}), expected.get(name, {})
        keys = sorted(k for k in {*have, *want} if have.get(k) != want.get(k))
        if keys:
            parts.append(f"{name}: {len(keys)} rows differ, e.g. " + "; ".join(
                f"id {k}: target {str(have.get(k))[:60]} source {str(want.get(k))[:60]}" for k in keys[:2]))
    return " | ".join(parts) or "equal"


# One run's outcome and its database: here with the workload, not in the check, because both the
# in-session check and the job check (cdc_shapes_pg_job) use them, and the check runs the job one.
@dataclass
class ShapesOutcome:
    seed: int
    transactions: int = 0
    statements: int = 0
    crashes: int = 0
    batches: int = 0
    schema_changes: int = 0     # queries started again with a table's new shape
    tables_added: int = 0       # tables created and captured on a resume with a changed config
    way_outs: list = field(default_factory=list)      # each failure the check recovered from, by its reason
    window_changes: list = field(default_factory=list)  # changes made between a description and a first batch


def shapes_database(admin: Endpoint, seed: int) -> Endpoint:
    """A fresh database on the source's server (the admin endpoint's), for one run."""
    name = f"shapes_{seed}_{secrets.token_hex(3)}"
    admin.execute(f"CREATE DATABASE {name}")
    port = int(admin.url.rsplit(":", 1)[1].split("/")[0])
    return postgres_endpoint(port, name)


def drop_database(admin: Endpoint, source: Endpoint) -> None:
    name = source.url.rsplit("/", 1)[1]
    admin.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                  f"WHERE database = '{name}' AND NOT active", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
