"""Each source's context for the source contract suite (``test_sources.py``): real data in its
system (files, a PostgreSQL or MariaDB table of its own, a private HTTP server's answers, keys of
a private redis-server), the source block that reads it, and what a run resumed after a change of
that data must deliver. A source supplies this and nothing else; the suite owns the cases and
runs them as jobs do.

Rows are ``id bigint, name string``; the suite checks ids.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field

from seatide.connectors.jdbc.url import JdbcUrl
from tests.contract.systems import JDBC_SERVERS

# The two ways a run is interrupted (the suite's resume cases): "replayed", the attempt died
# right after its sinks decided batch K, so the next attempt replays K from its logged offsets;
# "stopped", the job was stopped before batch K ran and a new incarnation resumes it.
REPLAYED, STOPPED = "replayed", "stopped"


@dataclass
class SourceSystem:
    """What the suite needs of one source's system."""

    name: str
    max_rows: int            # micro-batch.max-rows: several batches out of the data
    min_batches: int         # batches a run takes at least with it
    interrupt_at: int        # the batch the resume cases interrupt (some batches committed before it)
    rows_bounded: bool = True    # a batch holds at most max_rows rows (False: one poll is one batch)
    rows: list[int] = field(default_factory=list)

    def block(self) -> str:
        """The source's HOCON block (without plugin_output) reading the data."""
        raise NotImplementedError

    def change(self) -> None:
        """Change the data while the job is interrupted (rows added, removed)."""

    def expected_after_change(self, how: str) -> list[int]:
        """The ids a run interrupted ``how`` (REPLAYED / STOPPED) and resumed after ``change``
        delivers, each once, sorted."""
        return sorted(self.rows)

    def close(self) -> None:
        """Remove what the context made outside the test's own directory."""


class FakeSystem(SourceSystem):
    """FakeSource: splits of a fixed layout; its offset is the units admitted so far."""

    def __init__(self):
        # three batches, as the other contexts: one before the interrupted one, one after it
        super().__init__("Fake", max_rows=200, min_batches=3, interrupt_at=1, rows=list(range(600)))

    def block(self) -> str:
        # row.num and split.num are each reader's: the job's parallelism is 2
        return ('FakeSource { row.num = 300, split.num = 3, sequence.field = "id", '
                "schema = { fields { id = bigint, name = string } } }")


class LocalFileSystem(SourceSystem):
    """LocalFile: csv files read by Spark's file stream; its offset is its log of files read,
    so a file added while the job is interrupted is read by the resumed run, once."""

    def __init__(self, root: str):
        super().__init__("LocalFile", max_rows=100, min_batches=3, interrupt_at=1)
        self.root = os.path.join(root, "input")
        os.makedirs(self.root)
        for number in range(6):
            self._file(number, range(number * 50, number * 50 + 50))

    def _file(self, number: int, ids) -> None:
        with open(os.path.join(self.root, f"part-{number:02d}.csv"), "w") as handle:
            handle.writelines(f"{i},row {i}\n" for i in ids)
        self.rows += list(ids)

    def block(self) -> str:
        return (f'LocalFile {{ path = "{self.root}", file_format_type = csv, '
                "schema = { fields { id = bigint, name = string } } }")

    def change(self) -> None:
        self._file(99, range(1000, 1050))


class JdbcSystem(SourceSystem):
    """Jdbc: a table of its own split by id ranges; its offset is the index of the next split of
    the plan made when the job started, so a resumed run keeps that plan: a row deleted from a
    split not yet read is not delivered, a row inserted past the plan's upper bound is not read."""

    def __init__(self, server: str):
        super().__init__(server, max_rows=100, min_batches=3, interrupt_at=1, rows=list(range(1, 301)))
        template, self.user = JDBC_SERVERS[server]
        self.url = template.format(db="test")
        self.table = f"srccontract_{secrets.token_hex(4)}"
        numbers = ("generate_series(1, 300) g" if server == "PostgreSQL"
                   else "(SELECT seq AS g FROM seq_1_to_300) s")
        self._execute(f"CREATE TABLE {self.table} (id bigint PRIMARY KEY, name varchar(20))",
                      f"INSERT INTO {self.table} SELECT g, concat('row ', g) FROM {numbers}")

    def _execute(self, *statements: str) -> None:
        with JdbcUrl.parse(self.url).connect(self.user, autocommit=True) as conn:
            cursor = conn.cursor()
            for statement in statements:
                cursor.execute(statement)

    def block(self) -> str:
        return (f'Jdbc {{ url = "{self.url}", user = "{self.user}", table_path = "{self.table}", '
                'partition_column = "id", split.size = 50 }')

    def change(self) -> None:
        # 290 is in the last split, read after the interruption; 301 and 900 lie past the plan
        self._execute(f"DELETE FROM {self.table} WHERE id = 290",
                      f"INSERT INTO {self.table} VALUES (301, 'late'), (900, 'later')")

    def expected_after_change(self, how: str) -> list[int]:
        return [i for i in self.rows if i != 290]

    def close(self) -> None:
        self._execute(f"DROP TABLE IF EXISTS {self.table}")


class HttpSystem(SourceSystem):
    """Http: a paged endpoint of a private server, read by one poll (a checkpointed BATCH job polls
    once: one batch); its offset is the polls admitted. The endpoint keeps no position: a poll not
    yet decided asks again and gets the answer of then; a decided one is never asked again."""

    def __init__(self, server):
        super().__init__("Http", max_rows=100, min_batches=1, interrupt_at=0, rows_bounded=False,
                         rows=list(range(200)))
        self.server = server
        self.path = f"/rows-{secrets.token_hex(3)}"
        self.answer = list(self.rows)
        server.route(self.path, self._page)

    def _page(self, request):
        page = int(request.query.get("page", "1"))
        ids = self.answer[(page - 1) * 50:page * 50]
        return 200, [{"id": i, "name": f"row {i}"} for i in ids]

    def block(self) -> str:
        return (f'Http {{ url = "{self.server.url(self.path)}", format = json, '
                'pageing = { page_field = page, batch_size = 50 }, '
                "schema = { fields { id = bigint, name = string } } }")

    def change(self) -> None:
        self.answer = list(range(250))

    def expected_after_change(self, how: str) -> list[int]:
        return sorted(self.rows) if how == REPLAYED else sorted(self.answer)


class PaimonSystem(SourceSystem):
    """Paimon: a table of a filesystem warehouse written in three snapshots; its offset is the
    snapshot read up to. A BATCH job reads the table as of its newest snapshot in one batch; a
    snapshot committed while the job is interrupted is read after it, as a delta, once."""

    def __init__(self, root: str):
        super().__init__("Paimon", max_rows=100, min_batches=1, interrupt_at=0, rows_bounded=False)
        self.warehouse = os.path.join(root, "warehouse")
        for first in (0, 100, 200):
            self._snapshot(range(first, first + 100))

    def _snapshot(self, ids) -> None:
        from tests.connectors.paimon_helpers import put

        put(self.warehouse, "contract.source", {"id": list(ids), "name": [f"row {i}" for i in ids]})
        self.rows += list(ids)

    def block(self) -> str:
        return f'Paimon {{ warehouse = "{self.warehouse}", database = contract, table = source }}'

    def change(self) -> None:
        self._snapshot(range(1000, 1050))


class IcebergSystem(SourceSystem):
    """Iceberg: a table of a Hadoop catalog appended in three snapshots (a data file each); its
    offset is a snapshot and how many of its files were read, so a batch takes whole files up to
    the row bound; a snapshot appended while the job is interrupted is read after them, once."""

    def __init__(self, root: str):
        import pyarrow as pa

        from seatide.connectors.iceberg.catalogs import load_catalog

        super().__init__("Iceberg", max_rows=100, min_batches=3, interrupt_at=1)
        self.config = {"type": "hadoop", "warehouse": f"file://{root}/warehouse"}
        catalog = load_catalog("default", self.config)
        catalog.create_namespace("contract")
        columns = pa.schema([("id", pa.int64()), ("name", pa.large_string())])
        self.table = catalog.create_table("contract.source", columns)
        for first in (0, 100, 200):
            self._append(range(first, first + 100))

    def _append(self, ids) -> None:
        import pyarrow as pa

        self.table.append(pa.table({"id": pa.array(list(ids), pa.int64()), "name": [f"row {i}" for i in ids]},
                                   schema=self.table.schema().as_arrow()))
        self.rows += list(ids)

    def block(self) -> str:
        config = ", ".join(f'"{k}" = "{v}"' for k, v in self.config.items())
        return f"Iceberg {{ namespace = contract, table = source, iceberg.catalog.config = {{ {config} }} }}"

    def change(self) -> None:
        self._append(range(1000, 1050))


class RedisSystem(SourceSystem):
    """Redis: string keys of a pattern of its own on a private redis-server, each a JSON row, read
    as the source reads them (SCAN MATCH, then GET). Redis keeps no change log, so the source has
    no position within its keys: a checkpointed BATCH read is one scan, one batch (as Http's one
    poll), its offset whether the scan was admitted. A replayed batch that the sink decided writes
    nothing again; a scan not yet decided reads the keys of then, a key deleted meanwhile not
    delivered, one added delivered."""

    def __init__(self, server):
        super().__init__("Redis", max_rows=100, min_batches=1, interrupt_at=0, rows_bounded=False)
        self.server = server
        self.prefix = f"srccontract:{secrets.token_hex(3)}:"
        self.now = self._keys(range(300), [])
        self.rows = list(self.now)

    def _keys(self, ids, deleted) -> list[int]:
        """The ids held after setting ``ids`` and deleting ``deleted``."""
        import json

        client = self.server.client()
        try:
            client.mset({f"{self.prefix}{i}": json.dumps({"id": i, "name": f"row {i}"}) for i in ids})
            if deleted:
                client.delete(*(f"{self.prefix}{i}" for i in deleted))
            return sorted(int(k.decode().removeprefix(self.prefix)) for k in client.scan_iter(f"{self.prefix}*"))
        finally:
            client.close()

    def block(self) -> str:
        return (f'Redis {{ host = "127.0.0.1", port = {self.server.port}, keys = "{self.prefix}*", data_type = key, '
                "schema = { fields { id = bigint, name = string } } }")

    def change(self) -> None:
        self.now = self._keys(range(1000, 1050), [290])

    def expected_after_change(self, how: str) -> list[int]:
        return sorted(self.rows) if how == REPLAYED else self.now

    def close(self) -> None:
        client = self.server.client()
        try:
            keys = list(client.scan_iter(f"{self.prefix}*"))
            if keys:
                client.delete(*keys)
        finally:
            client.close()


__all__ = ["FakeSystem", "HttpSystem", "IcebergSystem", "JdbcSystem", "LocalFileSystem", "PaimonSystem", "REPLAYED",
           "RedisSystem", "STOPPED", "SourceSystem"]
