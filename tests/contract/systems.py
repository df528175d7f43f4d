"""Each sink's context for the sink contract suite (``test_sinks.py``): how to make a target in
its system, build the sink for one table writing into it, put rows there that are not the job's,
read back what a reader sees, and write into it concurrently where the system allows it. A sink
supplies this and nothing else; the suite owns the cases (as a Flink connector's tests supply
an external context to ``SinkTestSuiteBase``).

Rows are ``id bigint, name string``; a reader sees ids.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from seatide.connectors.file.sink import LocalFileSink
from seatide.connectors.hive.sink import HiveSink
from seatide.connectors.http.sink import IDEMPOTENCY_HEADER, HttpSink
from seatide.connectors.iceberg.sink import IcebergSink
from seatide.connectors.jdbc.sink import JdbcSink
from seatide.connectors.jdbc.url import JdbcUrl
from seatide.connectors.paimon.sink import PaimonSink
from seatide.connectors.redis.sink import RedisSink
from seatide.plugin.options import read_options


@dataclass
class TargetSystem:
    """What the suite needs of one sink's system."""

    name: str
    # Each save-mode setting the sink has, with what it does to rows already in a target:
    # "removes" them, "keeps" them, or "refuses" to start while there are any.
    save_modes: dict[str, tuple[dict, str]] = field(default_factory=dict)
    keyed: bool = False                 # applies changes by key (takes deletes and updates)
    concurrent_writers: bool = True     # another writer may add to a target while the sink writes
    # False: at least once (Http), a batch whose attempt died after sending it is sent again, each
    # row with the key it had the first time, and ``read`` is what a receiver keeping one row a key sees
    exactly_once: bool = True

    def new_target(self) -> str:
        """A fresh target; the name a sink's options give it."""
        raise NotImplementedError

    def sink(self, target: str, **options):
        """The sink built for one table writing into ``target`` (as the loader builds each route's)."""
        raise NotImplementedError

    def location(self, target: str) -> str:
        raise NotImplementedError

    def missing_target(self) -> str | None:
        """A target that does not exist yet, which the sink creates when it prepares it (its
        default schema save mode); None: the sink creates no targets."""
        return None

    def exists(self, target: str) -> bool:
        """Whether ``target`` exists (asked only of a ``missing_target``)."""
        raise NotImplementedError

    def read(self, target: str) -> list[int]:
        """The ids a reader of ``target`` sees, sorted (duplicates kept)."""
        ids = []
        root = self.location(target)
        for directory, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
            for name in files:
                if not name.startswith((".", "_")):
                    ids += pq.read_table(os.path.join(directory, name), columns=["id"]).column("id").to_pylist()
        return sorted(ids)

    def put(self, target: str, ids) -> None:
        """Rows that are not the job's: there before it ran, or written by another writer meanwhile."""
        root = self.location(target)
        os.makedirs(root, exist_ok=True)
        table = pa.table({"id": pa.array(list(ids), pa.int64()), "name": pa.array([f"other {i}" for i in ids])})
        pq.write_table(table, os.path.join(root, f"other-{secrets.token_hex(4)}.parquet"))

    def staging_left(self, target: str) -> list[str]:
        """Hidden files the sink left in the target (staging of batches never decided)."""
        root = os.path.join(self.location(target), ".seatide-staging")
        return [os.path.join(d, f) for d, _, files in os.walk(root) for f in files]


FILE_SAVE_MODES = {
    "APPEND_DATA": ({"data_save_mode": "APPEND_DATA"}, "keeps"),
    "DROP_DATA": ({"data_save_mode": "DROP_DATA"}, "removes"),
    "ERROR_WHEN_DATA_EXISTS": ({"data_save_mode": "ERROR_WHEN_DATA_EXISTS"}, "refuses"),
}


class LocalFileSystem(TargetSystem):
    def __init__(self, root: str):
        super().__init__("LocalFile", {**FILE_SAVE_MODES,
                                       "RECREATE_SCHEMA": ({"schema_save_mode": "RECREATE_SCHEMA"}, "removes")})
        self.root = root

    def new_target(self) -> str:
        return os.path.join(self.root, f"out_{secrets.token_hex(3)}")

    def location(self, target: str) -> str:
        return target

    def missing_target(self) -> str:
        return self.new_target()        # a path not made yet

    def exists(self, target: str) -> bool:
        return os.path.isdir(target)

    def sink(self, target: str, **options):
        return LocalFileSink(read_options({"path": target, "file_format_type": "parquet", **options},
                                          LocalFileSink.options))


class HiveSystem(TargetSystem):
    def __init__(self, metastore):
        super().__init__("Hive", dict(FILE_SAVE_MODES))
        self.metastore = metastore

    def new_target(self) -> str:
        from tests.connectors.test_hive import create_table

        name = f"contract.t_{secrets.token_hex(3)}"
        create_table(self.metastore, name, [("id", "bigint"), ("name", "string")], [], "parquet")
        return name

    def location(self, target: str) -> str:
        database, table = target.split(".")
        return f"{self.metastore.warehouse}/{database}.db/{table}"

    def sink(self, target: str, **options):
        return HiveSink(read_options({"table_name": target, "metastore_uri": self.metastore.uri, **options},
                                     HiveSink.options))


class PaimonSystem(TargetSystem):
    """A table of a filesystem warehouse without keys (appends: other writers may add to it too);
    other writers' rows are written with pypaimon directly."""

    def __init__(self, root: str):
        super().__init__("Paimon", {**FILE_SAVE_MODES,
                                    "RECREATE_SCHEMA": ({"schema_save_mode": "RECREATE_SCHEMA"}, "removes")})
        self.warehouse = os.path.join(root, "warehouse")

    def new_target(self) -> str:
        return f"contract.t_{secrets.token_hex(3)}"

    def missing_target(self) -> str:
        return self.new_target()        # a table made only by a writer

    def exists(self, target: str) -> bool:
        from seatide.connectors.paimon.warehouse import get_table, open_catalog

        return get_table(open_catalog(self.warehouse), *target.split(".")) is not None

    def sink(self, target: str, **options):
        database, table = target.split(".")
        return PaimonSink(read_options({"warehouse": self.warehouse, "database": database, "table": table, **options},
                                       PaimonSink.options))

    def read(self, target: str) -> list[int]:
        from tests.connectors.paimon_helpers import rows_of

        try:
            return sorted(row[0] for row in rows_of(self.warehouse, target, columns=("id",)))
        except Exception as exc:       # noqa: BLE001 - pypaimon's "no such table": a reader sees no rows
            if "not exist" in str(exc).lower():
                return []
            raise

    def put(self, target: str, ids) -> None:
        from tests.connectors.paimon_helpers import put

        ids = list(ids)
        put(self.warehouse, target, {"id": pa.array(ids, pa.int64()), "name": pa.array([f"other {i}" for i in ids])})

    def staging_left(self, target: str) -> list[str]:
        return []        # staged files of undecided batches are named by no snapshot (orphans to Paimon)


class IcebergSystem(TargetSystem):
    """A table of a SQL catalog on SQLite (one per test) without keys: appends, which other
    writers may add to (optimistic commits); other writers' rows are appended with pyiceberg."""

    def __init__(self, root: str):
        super().__init__("Iceberg", {**FILE_SAVE_MODES,
                                     "RECREATE_SCHEMA": ({"schema_save_mode": "RECREATE_SCHEMA"}, "removes")})
        self.config = {"type": "jdbc", "uri": f"jdbc:sqlite:{root}/catalog.db", "warehouse": f"file://{root}/warehouse"}

    def _catalog(self):
        from seatide.connectors.iceberg.catalogs import load_catalog

        return load_catalog("default", self.config)

    def new_target(self) -> str:
        from pyiceberg.schema import Schema
        from pyiceberg.types import LongType, NestedField, StringType

        name = f"contract.t_{secrets.token_hex(3)}"
        catalog = self._catalog()
        catalog.create_namespace_if_not_exists("contract")
        catalog.create_table(name, Schema(NestedField(1, "id", LongType(), required=False),
                                          NestedField(2, "name", StringType(), required=False)))
        return name

    def missing_target(self) -> str:
        self._catalog().create_namespace_if_not_exists("contract")
        return f"contract.t_{secrets.token_hex(3)}"

    def exists(self, target: str) -> bool:
        return self._catalog().table_exists(target)

    def sink(self, target: str, **options):
        namespace, table = target.split(".")
        return IcebergSink(read_options({"namespace": namespace, "table": table, "iceberg.catalog.config": self.config,
                                         **options}, IcebergSink.options))

    def read(self, target: str) -> list[int]:
        arrow = self._catalog().load_table(target).scan(selected_fields=("id",)).to_arrow()
        return sorted(arrow.column("id").to_pylist())

    def put(self, target: str, ids) -> None:
        ids = list(ids)
        self._catalog().load_table(target).append(
            pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array([f"other {i}" for i in ids])}))

    def staging_left(self, target: str) -> list[str]:
        return []        # staged files of undecided batches are named by no snapshot (orphans to Iceberg)


class RedisSystem(TargetSystem):
    """A list of a private redis-server (one per module), each row a JSON object pushed to it: a
    row written twice shows (RPUSH is not idempotent). No save modes; other writers push too."""

    def __init__(self, server):
        super().__init__("Redis", {})
        self.server = server

    def new_target(self) -> str:
        return f"t_{secrets.token_hex(3)}"

    def sink(self, target: str, **options):
        return RedisSink(read_options({"host": "127.0.0.1", "port": self.server.port, "key": target,
                                       "data_type": "list", **options}, RedisSink.options))

    def read(self, target: str) -> list[int]:
        import json

        client = self.server.client()
        try:
            return sorted(json.loads(v)["id"] for v in client.lrange(target, 0, -1))
        finally:
            client.close()

    def put(self, target: str, ids) -> None:
        import json

        client = self.server.client()
        try:
            for i in ids:
                client.rpush(target, json.dumps({"id": i, "name": f"other {i}"}))
        finally:
            client.close()

    def staging_left(self, target: str) -> list[str]:
        return []        # nothing is staged: a batch and its record go in one MULTI/EXEC


class HttpSystem(TargetSystem):
    """An endpoint of a private HTTP server (one per module) that keeps each row once by its
    ``Idempotency-Key``, as an endpoint honouring the header does (rows without one are all kept):
    the Http sink is at least once, so a batch replayed is sent again, with the same keys, and a
    reader sees it once. A key sent again with another row fails the read. No save modes; other
    writers post too."""

    def __init__(self, server):
        super().__init__("Http", {}, exactly_once=False)
        self.server = server

    def new_target(self) -> str:
        path = f"/t_{secrets.token_hex(3)}"
        self.server.route(path, lambda _request: (200, {"ok": True}))
        return path

    def sink(self, target: str, **options):
        return HttpSink(read_options({"url": self.server.url(target), **options}, HttpSink.options))

    def read(self, target: str) -> list[int]:
        import json

        kept: dict[str, dict] = {}
        ids = []
        for request in self.server.sent(target):
            row, key = json.loads(request.body), request.headers.get(IDEMPOTENCY_HEADER.lower())
            if key is None:
                ids.append(row["id"])
            else:
                assert kept.setdefault(key, row) == row, f"{IDEMPOTENCY_HEADER} {key} sent with two rows"
        return sorted(ids + [row["id"] for row in kept.values()])

    def put(self, target: str, ids) -> None:
        import json
        import urllib.request

        for i in ids:
            body = json.dumps({"id": i, "name": f"other {i}"}).encode()
            urllib.request.urlopen(urllib.request.Request(self.server.url(target), body, method="POST")).close()

    def staging_left(self, target: str) -> list[str]:
        return []        # nothing is staged: rows are sent as the batch runs


JDBC_SERVERS = {       # context name -> (URL template, user): the running servers' test users
    "PostgreSQL": ("jdbc:postgresql://127.0.0.1:5432/{db}", "postgres"),
    "MariaDB": ("jdbc:mariadb://127.0.0.1:3306/{db}", "root"),
}


class JdbcSystem(TargetSystem):
    """A table of a database of the suite's own (``database``: made per module, dropped after);
    without keys the sink inserts, so a row written twice shows; ``keyed``: the table's primary
    key is ``id`` and the sink applies changes by it. Other writers insert with their own session."""

    def __init__(self, server: str, database: str, keyed: bool = False):
        removes_by_sql = {"data_save_mode": "CUSTOM_PROCESSING", "custom_sql": "DELETE FROM {target}"}
        super().__init__(server + ("-keyed" if keyed else ""), {
            "DROP_DATA": ({"data_save_mode": "DROP_DATA"}, "removes"),
            "APPEND_DATA": ({"data_save_mode": "APPEND_DATA"}, "keeps"),
            "ERROR_WHEN_DATA_EXISTS": ({"data_save_mode": "ERROR_WHEN_DATA_EXISTS"}, "refuses"),
            "CUSTOM_PROCESSING": (removes_by_sql, "removes"),
            "RECREATE_SCHEMA": ({"schema_save_mode": "RECREATE_SCHEMA"}, "removes"),
        }, keyed=keyed)
        template, self.user = JDBC_SERVERS[server]
        self.url = template.format(db=database)

    def _run(self, sql: str, args=None) -> list[tuple]:
        conn = JdbcUrl.parse(self.url).connect(self.user, autocommit=True)
        try:
            cursor = conn.cursor()
            cursor.execute(sql, args)
            return [tuple(r) for r in cursor.fetchall()] if cursor.description else []
        finally:
            conn.close()

    def new_target(self) -> str:
        name = f"t_{secrets.token_hex(3)}"
        self._run(f"CREATE TABLE {name} (id BIGINT{' PRIMARY KEY' if self.keyed else ''}, name VARCHAR(100))")
        return name

    def missing_target(self) -> str:
        return f"t_{secrets.token_hex(3)}"

    def exists(self, target: str) -> bool:
        return bool(self._run("SELECT 1 FROM information_schema.tables WHERE table_name = %s", (target,)))

    def sink(self, target: str, **options):
        options = {k: v.format(target=target) if isinstance(v, str) else v for k, v in options.items()}
        keys = {"primary_keys": ["id"]} if self.keyed else {}
        return JdbcSink(read_options({"url": self.url, "user": self.user, "table": target, **keys, **options},
                                     JdbcSink.options))

    def read(self, target: str) -> list[int]:
        return sorted(r[0] for r in self._run(f"SELECT id FROM {target}"))

    def put(self, target: str, ids) -> None:
        for i in ids:
            self._run(f"INSERT INTO {target} (id, name) VALUES (%s, %s)", (i, f"other {i}"))

    def staging_left(self, target: str) -> list[str]:
        return [r[0] for r in self._run("SELECT table_name FROM information_schema.tables "
                                        "WHERE table_name LIKE 'seatide_stage_%%'")]


def jdbc_database(server: str):
    """A database of the suite's own on ``server`` (a generator: made, then dropped)."""
    template, user = JDBC_SERVERS[server]
    name = f"contract_{secrets.token_hex(3)}"
    admin = JdbcUrl.parse(template.format(db="test")).connect(user, autocommit=True)
    try:
        admin.cursor().execute(f"CREATE DATABASE {name}")
        yield name
        admin.cursor().execute(f"DROP DATABASE IF EXISTS {name}" + (" WITH (FORCE)" if server == "PostgreSQL" else ""))
    finally:
        admin.close()


__all__ = ["HiveSystem", "HttpSystem", "IcebergSystem", "JdbcSystem", "LocalFileSystem", "PaimonSystem", "TargetSystem",
           "jdbc_database"]
