"""Http source and sink against a real HTTP server on 127.0.0.1 (a thread of the test), run as jobs in process."""

from __future__ import annotations

import json
import os
from urllib.parse import parse_qs

import pytest

from seatide.config.loader import ConfigError, load_job_text
from seatide.testing.http_server import LocalHttp, failing
from tests.e2e.harness import InProcessCluster

pytestmark = pytest.mark.spark

STORE = {"store": {"book": [{"category": "reference", "author": "Nigel Rees", "title": "Sayings of the Century",
                             "price": 8.95},
                            {"category": "fiction", "author": "Evelyn Waugh", "title": "Sword of Honour",
                             "price": 12.99}],
                   "bicycle": {"color": "red", "price": 19.95}},
         "expensive": 10}
BOOK_SCHEMA = "schema = { fields { category = string, author = string, title = string, price = string } }"


@pytest.fixture(scope="module")
def module_server():
    server = LocalHttp()
    yield server
    server.stop()


@pytest.fixture
def server(module_server):
    module_server.reset()
    return module_server


def run(spark, tmp_path, text: str, variables: dict | None = None):
    result = InProcessCluster(spark, str(tmp_path / "data")).run(text, variables)
    assert result.status == "FINISHED", result.error
    return result


def failed(spark, tmp_path, text: str) -> str:
    result = InProcessCluster(spark, str(tmp_path / "data")).run(text)
    assert result.status == "FAILED"
    return result.error


def source_job(source: str, env: str = "job.mode = BATCH", sink: str = "Console {}") -> str:
    return f"env {{ {env} }}\nsource {{ Http {{ {source} }} }}\nsink {{ {sink} }}\n"


def collected(spark, tmp_path, source: str) -> list[dict]:
    out = tmp_path / "out"
    run(spark, tmp_path, source_job(source, sink=f'LocalFile {{ path = "{out}", file_format_type = json }}'))
    return sorted((r.asDict() for r in spark.read.json(str(out)).collect()), key=json.dumps)


def test_content_field_picks_the_rows_out_of_the_answer(spark, tmp_path, server):
    server.route("/store", lambda r: (200, STORE))
    rows = collected(spark, tmp_path, f'url = "{server.url("/store")}", format = json, '
                                      f'content_field = "$.store.book.*", {BOOK_SCHEMA}')
    assert rows == [{"author": "Evelyn Waugh", "category": "fiction", "price": "12.99", "title": "Sword of Honour"},
                    {"author": "Nigel Rees", "category": "reference", "price": "8.95",
                     "title": "Sayings of the Century"}]


def test_json_field_zips_one_path_per_column(spark, tmp_path, server):
    server.route("/store", lambda r: (200, STORE))
    fields = ", ".join(f'{name} = "$.store.book[*].{name}"' for name in ("category", "author", "title", "price"))
    rows = collected(spark, tmp_path, f'url = "{server.url("/store")}", format = json, '
                                      f'json_field = {{ {fields} }}, {BOOK_SCHEMA}')
    assert [(r["author"], r["price"]) for r in rows] == [("Evelyn Waugh", "12.99"), ("Nigel Rees", "8.95")]


def test_an_object_is_one_row_typed_by_the_schema_and_text_is_the_body(spark, tmp_path, server):
    server.route("/one", lambda r: (200, {"code": 200, "data": "get success", "success": True}))
    rows = collected(spark, tmp_path, f'url = "{server.url("/one")}", format = json, '
                                      'schema = { fields { code = int, data = string, success = boolean } }')
    assert rows == [{"code": 200, "data": "get success", "success": True}]
    rows = collected(spark, tmp_path / "text", f'url = "{server.url("/one")}"')
    assert [json.loads(r["content"]) for r in rows] == [{"code": 200, "data": "get success", "success": True}]


def test_headers_params_and_a_post_body_are_sent(spark, tmp_path, server):
    server.route("/query", lambda r: (200, [{"name": "a", "age": 1}]))
    base = (f'url = "{server.url("/query")}", format = json, headers = {{ X-Tenant = acme }}, '
            'schema = { fields { name = string, age = int } }')
    collected(spark, tmp_path, base + ', method = POST, body = "{\\"filter\\": \\"adults\\"}"')
    collected(spark, tmp_path / "get", base + ", params = { region = eu }")
    [post, get] = server.sent("/query")
    assert post.method == "POST" and post.headers["content-type"] == "application/json"
    assert post.headers["x-tenant"] == "acme" and post.json() == {"filter": "adults"}
    assert get.method == "GET" and get.query == {"region": "eu"}


def test_a_post_sends_its_params_as_a_form_as_seatunnel_does(spark, tmp_path, server):
    """SeaTunnel's client puts a POST's params in a form body (x-www-form-urlencoded), the page
    number too; a body given as well is then not sent (its entity is the form): a load warning says so."""
    def answer(request):
        page = int(parse_qs(request.body.decode())["page"][0])
        return 200, {"data": [{"name": f"p{page}-{i}", "age": page} for i in range(2 if page == 1 else 1)]}

    server.route("/form", answer)
    base = (f'url = "{server.url("/form")}", method = POST, format = json, content_field = "$.data.*", '
            'schema = { fields { name = string, age = int } }, params = { region = eu }, '
            "pageing = { page_field = page, batch_size = 2 }")
    rows = collected(spark, tmp_path, base + ', body = "{\\"filter\\": \\"adults\\"}"')
    assert sorted(r["age"] for r in rows) == [1, 1, 2]
    sent = server.sent("/form")
    assert [(r.method, r.query, r.headers["content-type"]) for r in sent] == \
        [("POST", {}, "application/x-www-form-urlencoded")] * 2
    assert [r.body for r in sent] == [b"region=eu&page=1", b"region=eu&page=2"]
    [notice] = load_job_text(source_job(base + ', body = "{}"')).sources[0].plugin.notices
    assert notice.key == "body" and "form" in notice.message


def pages(size: int, last: int, last_size: int):
    """Pages 1..last of ``size`` rows (the last of ``last_size``), then empty pages."""
    def handler(request):
        page = int(request.query["page"])
        count = size if page < last else last_size if page == last else 0
        return 200, {"data": [{"name": f"p{page}-{i}", "age": page} for i in range(count)]}
    return handler


def test_pages_are_read_until_one_is_short_or_the_total_is_reached(spark, tmp_path, server):
    server.route("/pages", pages(3, 4, 1))
    base = (f'url = "{server.url("/pages")}", format = json, content_field = "$.data.*", '
            'schema = { fields { name = string, age = int } }')
    rows = collected(spark, tmp_path, base + ", pageing = { page_field = page, batch_size = 3 }")
    assert len(rows) == 10 and {r["age"] for r in rows} == {1, 2, 3, 4}
    assert [r.query["page"] for r in server.sent("/pages")] == ["1", "2", "3", "4"]
    server.requests.clear()
    # SeaTunnel's page's own form: the parameter written as "${page}", replaced by the page number
    rows = collected(spark, tmp_path / "total", base + ', params = { page = "${page}" }, '
                                                       "pageing = { page_field = page, total_page_size = 3, "
                                                       "start_page_number = 2, batch_size = 3 }")
    assert sorted({r["age"] for r in rows}) == [2, 3]
    assert [r.query["page"] for r in server.sent("/pages")] == ["2", "3"]


def test_a_5xx_is_retried_with_backoff_until_it_succeeds(spark, tmp_path, server):
    server.route("/flaky", failing(2, 503, lambda r: (200, [{"name": "late", "age": 3}])))
    rows = collected(spark, tmp_path, f'url = "{server.url("/flaky")}", format = json, retry = 3, '
                                      'retry_backoff_multiplier_ms = 10, retry_backoff_max_ms = 50, '
                                      'schema = { fields { name = string, age = int } }')
    assert rows == [{"age": 3, "name": "late"}]
    assert len(server.sent("/flaky")) == 3


def test_a_bad_answer_fails_with_its_status_and_url_secrets_masked(spark, tmp_path, server):
    """A 5xx is retried by the request and then by the job (one job retry here, at once: the
    message is the subject, not the wait); a 4xx by neither, whatever the job's retries (the
    defaults); a refused connection fails naming the URL (no job retry: the message is the subject)."""
    server.route("/down", failing(1000, 500, lambda r: (200, [])))
    error = failed(spark, tmp_path, source_job(
        f'url = "{server.url("/down")}?token=tok-9f8e7d", retry = 1, retry_backoff_multiplier_ms = 1, '
        'params = { api_key = "k-123456", page_size = 10 }, headers = { Authorization = "Bearer abc-999888" }',
        env="job.mode = BATCH, job.retry.times = 1, job.retry.interval.seconds = 0"))
    assert "500" in error and f"127.0.0.1:{server.port}/down" in error and "page_size=10" in error
    assert "tok-9f8e7d" not in error and "k-123456" not in error and "abc-999888" not in error
    assert len(server.sent("/down")) == 2 * 2     # each of the job's two tries: the request and its one retry
    error = failed(spark, tmp_path / "404", source_job(f'url = "{server.url("/missing")}", retry = 3'))
    assert "404" in error and "/missing" in error
    assert len(server.sent("/missing")) == 1    # a 4xx is not retried
    error = failed(spark, tmp_path / "refused", source_job('url = "http://127.0.0.1:9/none", retry = 1, '
                                                           'retry_backoff_multiplier_ms = 1',
                                                           env="job.mode = BATCH, job.retry.times = 0"))
    assert "http://127.0.0.1:9/none" in error and "could not be reached" in error


def test_options_it_cannot_honour_are_refused_at_load_with_the_way_out():
    sink = "\nsink { Console {} }"
    with pytest.raises(ConfigError, match="poll_interval_millis' must be 1 or more"):
        load_job_text('source { Http { url = "http://h/x", poll_interval_millis = 0 } }' + sink)
    with pytest.raises(ConfigError, match="json_field needs a schema"):
        load_job_text('source { Http { url = "http://h/x", format = json, json_field = { a = "$.a" } } }' + sink)
    with pytest.raises(ConfigError, match="format = json needs a schema"):
        load_job_text('source { Http { url = "http://h/x", format = json } }' + sink)
    with pytest.raises(ConfigError, match="method"):
        load_job_text('source { Http { url = "http://h/x", method = PUT } }' + sink)
    with pytest.raises(ConfigError, match="http:// or https://"):
        load_job_text('source { Http { url = "ftp://h/x" } }' + sink)
    with pytest.raises(ConfigError, match="page_field"):
        load_job_text('source { Http { url = "http://h/x", pageing = { batch_size = 10 } } }' + sink)


def test_a_checkpointed_batch_job_polls_once(spark, tmp_path, server):
    server.route("/one", lambda r: (200, [{"name": "a", "age": 1}, {"name": "b", "age": 2}]))
    out = tmp_path / "out"
    run(spark, tmp_path, source_job(f'url = "{server.url("/one")}", format = json, '
                                    'schema = { fields { name = string, age = int } }',
                                    env="job.mode = BATCH, checkpoint.interval = 1000",
                                    sink=f'LocalFile {{ path = "{out}", file_format_type = json }}'))
    assert sorted(r["name"] for r in spark.read.json(str(out)).collect()) == ["a", "b"]
    assert len(server.sent("/one")) == 1


def test_a_bad_answer_in_a_micro_batch_fails_the_job_naming_status_and_url(spark, tmp_path, server):
    error = failed(spark, tmp_path, source_job(f'url = "{server.url("/gone")}?api_key=k-7777777"',
                                               env="job.mode = STREAMING, checkpoint.interval = 200"))
    assert "404" in error and "/gone" in error and "k-7777777" not in error
    assert len(server.sent("/gone")) == 1       # a 4xx is permanent: neither the request nor the job retried


def test_streaming_polls_the_endpoint_again_until_stopped(spark, tmp_path, server):
    import time

    from seatide.store.jobs import request_stop

    polls = {"n": 0}

    def tick(request):
        polls["n"] += 1
        return 200, {"data": [{"n": polls["n"]}]}

    server.route("/tick", tick)
    out = tmp_path / "out"
    text = source_job(f'url = "{server.url("/tick")}", format = json, content_field = "$.data.*", '
                      'poll_interval_millis = 300, schema = { fields { n = int } }',
                      env="job.mode = STREAMING, checkpoint.interval = 200",
                      sink=f'LocalFile {{ path = "{out}", file_format_type = json }}')

    def stop(store, job_id):
        deadline = time.monotonic() + 240
        while len(server.sent("/tick")) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        request_stop(store, job_id, savepoint=False, actor="test")

    result = InProcessCluster(spark, str(tmp_path / "data")).run(text, stop_after=stop)
    assert result.status == "CANCELED", result.error
    ns = [r["n"] for r in spark.read.json(str(out)).collect()]
    assert len(ns) >= 3 and len(set(ns)) == len(ns)     # each poll's answer once, a row each


def test_the_example_reads_seatunnels_rows(spark, tmp_path, server):
    server.route("/example/http", lambda r: (200, {"code": 200, "data": "get success", "success": True}))
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "http_to_console.conf"),
              encoding="utf-8") as handle:
        text = handle.read()
    out = tmp_path / "out"
    text = text.replace("Console {}", f'LocalFile {{ path = "{out}", file_format_type = json }}')
    run(spark, tmp_path, text, {"host": "127.0.0.1", "port": str(server.port)})
    assert [r.asDict() for r in spark.read.json(str(out)).collect()] == [
        {"code": 200, "data": "get success", "success": True}]


def sink_job(url: str, sink: str = "", env: str = "job.mode = BATCH",
             source: str = 'schema = { fields { code = int, data = string } }, '
                           'rows = [{ fields = [200, "get success"] }, { fields = [500, "internal error"] }]') -> str:
    return f'env {{ {env} }}\nsource {{ FakeSource {{ {source} }} }}\nsink {{ Http {{ url = "{url}" {sink} }} }}\n'


def test_the_sink_posts_each_row_as_a_json_object_with_its_headers(spark, tmp_path, server):
    server.route("/hook", failing(1, 502, lambda r: (200, {"ok": True})))
    run(spark, tmp_path, sink_job(server.url("/hook"), ', headers = { token = "9e32e859" }, retry = 2, '
                                                       'retry_backoff_multiplier_ms = 1'))
    sent = server.sent("/hook")
    assert [r.json() for r in sent[1:]] == [{"code": 200, "data": "get success"},
                                            {"code": 500, "data": "internal error"}]
    assert sent[0].json() == sent[1].json()         # the 502 was retried
    assert all(r.method == "POST" and r.headers["token"] == "9e32e859" and
               r.headers["content-type"] == "application/json" for r in sent)
    keys = [r.headers["idempotency-key"] for r in sent]
    assert keys[0] == keys[1] != keys[2] and keys[1].endswith("-0") and keys[2].endswith("-1")


def test_a_batch_replayed_after_a_crash_is_sent_again_with_the_same_idempotency_keys(
        spark, tmp_path, server, monkeypatch):
    """At least once: a batch sent, then replayed because the driver failed before its commit log
    recorded it, is sent again; each row carries the key it had, so an endpoint that honours
    Idempotency-Key keeps it once. Two batches: the failure meets the first; the second is the
    batch after the replay."""
    from seatide import failpoints

    server.route("/hook", lambda r: (200, {"ok": True}))
    marker = tmp_path / "failed"
    monkeypatch.setitem(failpoints._POINTS, "http.sent", f"once:raise:{marker}")
    run(spark, tmp_path, sink_job(server.url("/hook"), env="job.mode = BATCH, checkpoint.interval = 1000, "
                                  "micro-batch.max-rows = 10, job.retry.times = 3, "
                                  "job.retry.interval.seconds = 0",
                                  source='row.num = 20, split.num = 2, sequence.field = "id", '
                                         'schema = { fields { id = bigint, name = string } }'))
    assert marker.exists(), "the failpoint was met"
    by_key: dict[str, list] = {}
    for request in server.sent("/hook"):
        by_key.setdefault(request.headers["idempotency-key"], []).append(request.json())
    assert sorted(bodies[0]["id"] for bodies in by_key.values()) == list(range(20))   # one key per row
    assert all(all(b == bodies[0] for b in bodies) for bodies in by_key.values())   # a key names one row
    assert len(server.sent("/hook")) > 20       # the replayed batch was sent again ...
    assert any(len(bodies) == 2 for bodies in by_key.values())      # ... under the keys it had


def test_a_refused_post_fails_the_job_naming_status_and_url(spark, tmp_path, server):
    server.route("/hook", lambda r: (403, {"error": "forbidden"}))
    error = failed(spark, tmp_path, sink_job(server.url("/hook") + "?access_token=abc-7654321"))
    assert "403" in error and f"127.0.0.1:{server.port}/hook" in error and "abc-7654321" not in error
    assert len(server.sent("/hook")) == 1
