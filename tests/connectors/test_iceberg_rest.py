"""``iceberg.catalog.config`` with ``type = "rest"``, against SeaTide's own REST catalog server
(seatide.testing.iceberg_rest), started as a process of its own: the spec's routes and answers as
pyiceberg's REST client uses them, a failed requirement answered 409 and changing nothing, then a
FakeSource -> Iceberg job that crashes right after a commit and resumes with every row once and
one snapshot per batch, read back through the Iceberg source."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
import uuid

import pyarrow as pa
import pytest
from pyiceberg.types import DoubleType

from seatide.connectors.iceberg.catalogs import load_catalog
from seatide.connectors.iceberg.commits import without_retries
from tests.connectors.iceberg_helpers import batch_snapshots, rows_of
from tests.connectors.test_iceberg_jobs import crash_once_after_commit, hocon, local, parquet_rows

__all__ = ["local"]

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.large_string())])


def rows(ids) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "name": [f"n{i}" for i in ids]}, schema=SCHEMA)


def call(method: str, url: str, body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
            return response.status, json.loads(text) if text else {}
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def test_rest_catalog_serves_namespaces_and_tables_to_pyicebergs_client(iceberg_rest_server):
    from pyiceberg.exceptions import (CommitFailedException, NamespaceAlreadyExistsError, NamespaceNotEmptyError,
                                      NoSuchTableError)

    config = iceberg_rest_server.config()
    catalog = load_catalog("lake", config)
    catalog.create_namespace("ns", {"owner": "seatide"})
    catalog.create_namespace(("ns", "inner"))           # two levels: %1F in the path
    with pytest.raises(NamespaceAlreadyExistsError):
        catalog.create_namespace("ns")
    assert catalog.list_namespaces() == [("ns",)] and catalog.list_namespaces("ns") == [("ns", "inner")]
    assert catalog.namespace_exists(("ns", "inner")) and not catalog.namespace_exists("nope")
    catalog.update_namespace_properties("ns", updates={"k": "v"})
    assert catalog.load_namespace_properties("ns")["k"] == "v"

    table = catalog.create_table("ns.t", SCHEMA, properties={"write.format.default": "parquet"})
    assert catalog.table_exists("ns.t") and not catalog.table_exists("ns.nope")
    assert catalog.list_tables("ns") == [("ns", "t")]
    table.append(rows(range(3)))                        # add-snapshot + set-snapshot-ref
    stale = catalog.load_table("ns.t")
    table.append(rows(range(3, 5)))
    with pytest.raises(CommitFailedException):          # assert-ref-snapshot-id on a moved head: 409
        without_retries(stale).append(rows([99]))
    with table.update_schema() as update:               # add-schema + set-current-schema
        update.add_column("score", DoubleType())
    assert [f.name for f in catalog.load_table("ns.t").schema().fields] == ["id", "name", "score"]
    assert sorted(catalog.load_table("ns.t").scan().to_arrow().column("id").to_pylist()) == list(range(5))

    from seatide.connectors.iceberg.maintenance import expire_snapshots   # remove-snapshots

    assert len(expire_snapshots(catalog, ("ns", "t"), older_than_ms=0, retain_last=1)) == 1
    assert len(catalog.load_table("ns.t").metadata.snapshots) == 1

    with catalog.create_table_transaction("ns.staged", SCHEMA) as tx:    # stage-create, then assert-create
        tx.set_properties(origin="staged")
    assert catalog.load_table("ns.staged").properties["origin"] == "staged"

    catalog.rename_table("ns.t", ("ns", "inner", "u"))
    assert catalog.list_tables(("ns", "inner")) == [("ns", "inner", "u")] and not catalog.table_exists("ns.t")
    assert catalog.load_table(("ns", "inner", "u")).scan().to_arrow().num_rows == 5
    with pytest.raises(NamespaceNotEmptyError):
        catalog.drop_namespace(("ns", "inner"))
    catalog.drop_table(("ns", "inner", "u"))
    with pytest.raises(NoSuchTableError):
        catalog.load_table(("ns", "inner", "u"))
    catalog.drop_namespace(("ns", "inner"))
    assert catalog.list_namespaces("ns") == []


def test_rest_catalog_answers_with_the_specs_errors_and_a_failed_requirement_changes_nothing(iceberg_rest_server):
    config = iceberg_rest_server.config()
    catalog = load_catalog("lake", config)
    catalog.create_namespace("ns")
    catalog.create_table("ns.t", SCHEMA).append(rows([1]))
    base = f"{iceberg_rest_server.url}/v1/{config['warehouse']}"
    before = catalog.load_table("ns.t").metadata_location

    status, body = call("POST", f"{base}/namespaces/ns/tables/t", {
        "requirements": [{"type": "assert-table-uuid", "uuid": str(uuid.uuid4())}],
        "updates": [{"action": "set-properties", "updates": {"x": "1"}}]})
    assert status == 409 and body["error"]["type"] == "CommitFailedException", body
    for requirement in ({"type": "assert-current-schema-id", "current-schema-id": 7},
                        {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 99},
                        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}):
        status, body = call("POST", f"{base}/namespaces/ns/tables/t",
                            {"requirements": [requirement], "updates": [{"action": "remove-properties",
                                                                         "removals": ["x"]}]})
        assert status == 409 and body["error"]["type"] == "CommitFailedException", (requirement, body)
    assert catalog.load_table("ns.t").metadata_location == before      # nothing was written

    status, body = call("POST", f"{base}/namespaces/ns/tables/t", {"updates": [{"action": "no-such-update"}]})
    assert status == 400 and body["error"]["type"] == "BadRequestException", body
    status, body = call("GET", f"{base}/namespaces/ns/tables/missing")
    assert status == 404 and body["error"]["type"] == "NoSuchTableException", body
    status, body = call("GET", f"{base}/namespaces/missing/tables")
    assert status == 404 and body["error"]["type"] == "NoSuchNamespaceException", body
    status, body = call("GET", f"{iceberg_rest_server.url}/v1/config?warehouse=%2Ftmp%2Fx")
    assert status == 400 and "warehouse name" in body["error"]["message"], body
    status, body = call("GET", f"{iceberg_rest_server.url}/v1/config?warehouse={config['warehouse']}")
    assert status == 200 and body["overrides"] == {"prefix": config["warehouse"]}


def test_rest_server_refuses_a_relative_warehouse_with_a_clear_message(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "seatide.testing.iceberg_rest", "--port", "0", "--warehouse",
                           "relative/dir"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "must be an absolute directory path" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.spark
def test_fake_to_iceberg_over_rest_resumes_after_a_crash_then_reads_back_through_the_source(
        local, tmp_path, monkeypatch, iceberg_rest_server):
    config = iceberg_rest_server.config()
    marker = crash_once_after_commit(monkeypatch, tmp_path)
    run = local.run(f"""
env {{ job.mode = BATCH, checkpoint.interval = 1000, micro-batch.max-rows = 300, job.retry.interval.seconds = 0 }}
source {{ FakeSource {{ row.num = 900, split.num = 3, sequence.field = "id",
                       schema = {{ fields {{ id = bigint, name = string, score = double }} }} }} }}
sink {{ Iceberg {{ namespace = ns, table = t, iceberg.catalog.config = {hocon(config)} }} }}
""")
    assert run.status == "FINISHED", run.error
    assert os.path.exists(marker) and len(run.attempts()) == 2, "the first attempt died after its first commit"
    assert [r[0] for r in rows_of(config, columns=("id",))] == list(range(900))
    marks = batch_snapshots(config)
    assert len(marks) == 3 and len(set(marks)) == 3, marks     # one snapshot per batch, none twice

    out = str(tmp_path / "out")
    run = local.run(f"""
env {{ job.mode = BATCH }}
source {{ Iceberg {{ namespace = ns, table = t, iceberg.catalog.config = {hocon(config)} }} }}
sink {{ LocalFile {{ path = "{out}", file_format_type = parquet }} }}
""")
    assert run.status == "FINISHED", run.error
    assert parquet_rows(out) == rows_of(config)
