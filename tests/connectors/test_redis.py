"""Redis sink and source against a real, private redis-server (Debian's), run as jobs in process."""

from __future__ import annotations

import json
import os

import pytest

from seatide import failpoints
from seatide.config.loader import ConfigError, load_job_text
from seatide.testing.redis_server import PrivateRedis
from tests.e2e.harness import InProcessCluster

pytestmark = pytest.mark.spark

ROWS = """[{ fields = [200, "get success", true] }, { fields = [500, "internal error", false] }]"""
SCHEMA = "schema = { fields { code = int, data = string, success = boolean } }"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    redis = PrivateRedis(str(tmp_path_factory.mktemp("redis")), password="s3cret",
                         acl=["writer on >w-pass ~* +@all -flushall -flushdb"])
    yield redis
    redis.stop()


@pytest.fixture
def db(server):
    client = server.client()
    client.flushall()
    yield client
    client.close()


def sink_job(server, sink: str, rows: str = ROWS, schema: str = SCHEMA, env: str = "job.mode = BATCH") -> str:
    return f"""
env {{ {env} }}
source {{ FakeSource {{ {schema}, rows = {rows} }} }}
sink {{ Redis {{ host = "127.0.0.1", port = {server.port}, auth = "s3cret", {sink} }} }}
"""


def run(spark, tmp_path, text: str):
    result = InProcessCluster(spark, str(tmp_path / "data")).run(text)
    assert result.status == "FINISHED", result.error
    return result


def test_each_data_type_writes_as_seatunnels_page_says(spark, tmp_path, db, server):
    """One job, a sink per data type (one driver run instead of six; each assertion as it was when
    each was a job of its own). The hash goes to db 1: keys 200 and 500 hold strings in db 0, where
    a hash is refused (see below)."""
    sinks = "\n".join(f'Redis {{ plugin_input = "rows", host = "127.0.0.1", port = {server.port}, auth = "s3cret", '
                      f'{sink} }}' for sink in ("key = code, data_type = key", "key = value, data_type = key",
                                                "key = code, data_type = hash, db_num = 1",
                                                "key = events, data_type = list", "key = codes, data_type = set",
                                                "key = ranked, data_type = zset"))
    run(spark, tmp_path, f"""
env {{ job.mode = BATCH }}
source {{ FakeSource {{ plugin_output = "rows", {SCHEMA}, rows = {ROWS} }} }}
sink {{
{sinks}
}}
""")
    assert json.loads(db.get("200")) == {"code": 200, "data": "get success", "success": True}
    assert json.loads(db.get("500"))["data"] == "internal error"
    # a key that names no field is the key itself: the later row overwrites the earlier
    assert json.loads(db.get("value"))["code"] == 500
    db1 = server.client(db=1)
    try:
        assert db1.hgetall("200") == {b"code": b"200", b"data": b"get success", b"success": b"true"}
    finally:
        db1.close()
    assert [json.loads(v)["code"] for v in db.lrange("events", 0, -1)] == [200, 500]
    assert sorted(json.loads(v)["code"] for v in db.smembers("codes")) == [200, 500]
    assert [(json.loads(v)["code"], s) for v, s in db.zrange("ranked", 0, -1, withscores=True)] == [(200, 1.0), (500, 1.0)]


def test_expire_sets_each_written_keys_time_to_live(spark, tmp_path, db, server):
    run(spark, tmp_path, sink_job(server, "key = code, data_type = key, expire = 600"))
    assert 0 < db.ttl("200") <= 600 and 0 < db.ttl("500") <= 600
    run(spark, tmp_path, sink_job(server, "key = forever, data_type = key"))
    assert db.ttl("forever") == -1


def test_each_table_s_keys_expire_as_its_own_route_says(spark, tmp_path, db, server):
    """Several tables into one server are one target: each table's keys get its route's expire,
    not the first route's."""
    from seatide.connectors.redis.sink import RedisSink
    from seatide.plugin.options import read_options
    from seatide.plugin.tables import TableRoute
    from seatide.store.db import open_store
    from tests.contract.harness import Pipeline, tables

    def sink(key: str, expire: int) -> RedisSink:
        return RedisSink(read_options({"host": "127.0.0.1", "port": server.port, "auth": "s3cret", "key": key,
                                       "data_type": "list", "expire": expire}, RedisSink.options))

    store = open_store(f"sqlite:///{tmp_path}/state.db")
    try:
        pipeline = Pipeline(store, str(tmp_path / "checkpoints"))
        routes = [TableRoute(0, "shop.never", None, sink("never", -1)),
                  TableRoute(1, "shop.short", None, sink("short", 600))]
        pipeline.open(pipeline.attempt(), routes, spark).write(tables(spark, {0: [1], 1: [2]}), 0)
    finally:
        store.dispose()
    assert db.ttl("never") == -1 and 0 < db.ttl("short") <= 600


def test_changes_remove_what_their_row_wrote_in_the_order_they_happened(spark, tmp_path, db, server):
    changes = """[{ kind = INSERT, fields = [1, "one"] }, { kind = INSERT, fields = [2, "two"] },
                  { kind = UPDATE_BEFORE, fields = [1, "one"] }, { kind = UPDATE_AFTER, fields = [1, "uno"] },
                  { kind = DELETE, fields = [2, "two"] }, { kind = INSERT, fields = [3, "three"] }]"""
    schema = "schema = { fields { id = bigint, name = string } }"
    run(spark, tmp_path, sink_job(server, "key = id, data_type = key", changes, schema))
    assert sorted(k for k in db.keys() if not k.startswith(b"seatide:")) == [b"1", b"3"] and json.loads(db.get("1"))["name"] == "uno"
    run(spark, tmp_path, sink_job(server, "key = members, data_type = set", changes, schema))
    assert sorted(json.loads(v)["name"] for v in db.smembers("members")) == ["three", "uno"]
    run(spark, tmp_path, sink_job(server, "key = log, data_type = list", changes, schema))
    assert [json.loads(v)["name"] for v in db.lrange("log", 0, -1)] == ["uno", "three"]


def test_a_list_gets_each_row_once_across_driver_crashes_between_its_write_and_the_commit_log(
        spark, tmp_path, db, server, monkeypatch):
    """RPUSH is not idempotent: a batch written, then replayed after a crash before the commit log
    records it, must find its record in Redis and push nothing again. Two batches: the failpoint
    meets the first; the second is the batch after the replay."""
    marker = tmp_path / "killed"
    env = ("job.mode = BATCH, checkpoint.interval = 1000, micro-batch.max-rows = 250, job.retry.times = 3, "
           "job.retry.interval.seconds = 0")
    text = f"""
env {{ {env} }}
source {{ FakeSource {{ row.num = 500, split.num = 4, sequence.field = "id",
                       schema = {{ fields {{ id = bigint, name = string }} }} }} }}
sink {{ Redis {{ host = "127.0.0.1", port = {server.port}, auth = "s3cret", key = ids, data_type = list }} }}
"""
    monkeypatch.setitem(failpoints._POINTS, "redis.applied", f"once:raise:{marker}")
    result = InProcessCluster(spark, str(tmp_path / "data")).run(text)
    assert result.status == "FINISHED", result.error
    assert marker.exists(), "the failpoint was met"
    ids = sorted(json.loads(v)["id"] for v in db.lrange("ids", 0, -1))
    assert ids == list(range(500))


def test_a_key_of_another_type_fails_the_batch_naming_it(spark, tmp_path, db, server):
    db.set("events", "a string")
    result = InProcessCluster(spark, str(tmp_path / "data")).run(sink_job(server, "key = events, data_type = list"))
    assert result.status == "FAILED"
    assert "key 'events' holds a string, and data_type = list writes a list" in result.error
    assert db.get("events") == b"a string"


def test_an_acl_user_writes_and_a_wrong_password_is_named(spark, tmp_path, db, server):
    """A wrong password is permanent: the job fails at its first attempt, whatever its retries (the
    defaults, 3 after 3 s each), naming the refusal and not the password; in a sink (the driver) and
    in a checkpointed source (Spark's Python workers) alike."""
    text = sink_job(server, 'key = code, data_type = key, user = writer').replace('auth = "s3cret"', 'auth = "w-pass"')
    run(spark, tmp_path, text)
    assert db.exists("200")
    bad_sink = sink_job(server, "key = code, data_type = key").replace('auth = "s3cret"', 'auth = "wrong"')
    bad_source = source_job(server, f'keys = "user:*", data_type = key, {SCHEMA}',
                            env="job.mode = BATCH, checkpoint.interval = 1000").replace('auth = "s3cret"', 'auth = "wrong"')
    for name, bad in (("sink", bad_sink), ("source", bad_source)):
        result = InProcessCluster(spark, str(tmp_path / name)).run(bad)
        assert result.status == "FAILED" and "authentication failed" in result.error, (name, result.error)
        assert "wrong" not in result.error
        assert len(result.attempts()) == 1, (name, result.error)


def test_options_are_checked_at_load_with_the_way_out():
    base = 'source { FakeSource { row.num = 1, schema = { fields { a = int } } } }\n'
    with pytest.raises(ConfigError, match="cluster is not supported"):
        load_job_text(base + 'sink { Redis { host = h, port = 6379, key = a, data_type = key, mode = cluster } }')
    with pytest.raises(ConfigError, match="'expire' must be seconds"):
        load_job_text(base + 'sink { Redis { host = h, port = 6379, key = a, data_type = key, expire = 0 } }')
    with pytest.raises(ConfigError, match="data_type"):
        load_job_text(base + 'sink { Redis { host = h, port = 6379, key = a, data_type = stream } }')
    with pytest.raises(ConfigError, match="format = json needs a schema"):
        load_job_text('source { Redis { host = h, port = 6379, keys = "a*", data_type = key } }\n'
                      'sink { Console {} }')


def source_job(server, source: str, sink: str = "Console {}", env: str = "job.mode = BATCH") -> str:
    return f"""
env {{ {env} }}
source {{ Redis {{ host = "127.0.0.1", port = {server.port}, auth = "s3cret", {source} }} }}
sink {{ {sink} }}
"""


def collected(spark, tmp_path, text: str) -> list[dict]:
    out = tmp_path / "out"
    text = text.replace("Console {}", f'LocalFile {{ path = "{out}", file_format_type = json }}')
    run(spark, tmp_path, text)
    return sorted((r.asDict() for r in spark.read.json(str(out)).collect()), key=json.dumps)


def test_the_source_reads_every_data_type_by_pattern(spark, tmp_path, db, server):
    db.set("user:1", json.dumps({"name": "tyrantlucifer", "age": 26}))
    db.set("user:2", json.dumps({"name": "Zongwen", "age": 26}))
    db.set("other", json.dumps({"name": "not matched", "age": 1}))
    db.rpush("user:list", json.dumps({"name": "in a list", "age": 3}))      # another data type: skipped
    schema = "schema = { fields { name = string, age = int } }"
    rows = collected(spark, tmp_path, source_job(server, f'keys = "user:*", data_type = key, {schema}'))
    assert rows == [{"age": 26, "name": "Zongwen"}, {"age": 26, "name": "tyrantlucifer"}]
    rows = collected(spark, tmp_path / "l", source_job(server, f'keys = "user:list", data_type = list, {schema}'))
    assert rows == [{"age": 3, "name": "in a list"}]
    db.hset("people", mapping={"001": json.dumps({"name": "tyrantlucifer", "age": 26}),
                               "002": json.dumps({"name": "Zongwen", "age": 26})})
    rows = collected(spark, tmp_path / "kv", source_job(
        server, f'keys = people, data_type = hash, hash_key_parse_mode = kv, {schema}'))
    assert rows == [{"age": 26, "hash_key": "001", "name": "tyrantlucifer"}, {"age": 26, "hash_key": "002", "name": "Zongwen"}]
    db.hset("person", mapping={"name": "whole", "age": "7"})
    rows = collected(spark, tmp_path / "all", source_job(server, f'keys = person, data_type = hash, {schema}'))
    assert rows == [{"age": 7, "name": "whole"}]
    db.zadd("scores", {"b": 2, "a": 1})
    rows = collected(spark, tmp_path / "z", source_job(server, 'keys = scores, data_type = zset, format = text'))
    assert rows == [{"content": "a"}, {"content": "b"}]


def test_the_examples_write_and_read_back_seatunnels_rows(spark, tmp_path, db, server):
    """examples/fake_to_redis.conf, then examples/redis_to_console.conf, against this server."""
    root = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
    variables = {"host": "127.0.0.1", "port": str(server.port)}
    auth = f'    auth = "s3cret"\n    key ='
    with open(os.path.join(root, "fake_to_redis.conf"), encoding="utf-8") as handle:
        write = handle.read().replace("    key =", auth, 1)
    result = InProcessCluster(spark, str(tmp_path / "w")).run(write, variables)
    assert result.status == "FINISHED", result.error
    assert 3500 < db.ttl("200") <= 3600
    with open(os.path.join(root, "redis_to_console.conf"), encoding="utf-8") as handle:
        read = handle.read().replace("    keys =", '    auth = "s3cret"\n    keys =', 1)
    out = tmp_path / "out"
    read = read.replace("Console {}", f'LocalFile {{ path = "{out}", file_format_type = json }}')
    result = InProcessCluster(spark, str(tmp_path / "r")).run(read, variables)
    assert result.status == "FINISHED", result.error
    rows = sorted((r.asDict() for r in spark.read.json(str(out)).collect()), key=json.dumps)
    assert rows == [{"code": 200, "data": "get success", "success": True},
                    {"code": 500, "data": "internal error", "success": False}]


def test_a_checkpointed_job_reads_the_keys_in_one_batch_and_streaming_is_refused(spark, tmp_path, db, server):
    """Redis keeps no position within its keys: a checkpointed BATCH job's read is one scan, one
    micro-batch (the source contract suite covers its replay and resume); a STREAMING job has
    nothing to stream from and is refused, naming the way out."""
    db.set("user:1", json.dumps({"code": 200, "data": "a", "success": True}))
    db.set("user:2", json.dumps({"code": 500, "data": "b", "success": False}))
    checkpointed = source_job(server, f'keys = "user:*", data_type = key, {SCHEMA}',
                              env="job.mode = BATCH, checkpoint.interval = 1000")
    assert [r["code"] for r in collected(spark, tmp_path, checkpointed)] == [200, 500]
    streaming = source_job(server, f'keys = "user:*", data_type = key, {SCHEMA}',
                           env="job.mode = STREAMING, checkpoint.interval = 1000")
    result = InProcessCluster(spark, str(tmp_path / "s")).run(streaming)
    assert result.status == "FAILED" and "set job.mode = BATCH" in result.error
