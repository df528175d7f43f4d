"""Http's options, SeaTunnel's names and defaults (its Http source and sink pages), declared once."""

from __future__ import annotations

from urllib.parse import urlsplit

from seatide.plugin.options import BOOL, INT, OBJECT, REQUIRED, STRING, Option, enum
from seatide.plugin.schema import schema_options

# What the source and the sink share: the endpoint, and how hard to try it.
REQUEST = (
    Option("url", STRING, REQUIRED, "the endpoint, http:// or https://"),
    Option("headers", OBJECT, None, "headers sent with every request, name = value"),
    Option("retry", INT, None, "how many times a request is tried again after a connection error, a timeout "
           "or a 5xx answer (default none: one try)"),
    Option("retry_backoff_multiplier_ms", INT, 100, "the wait before the n-th retry is this times 2^(n-1), "
           "in milliseconds"),
    Option("retry_backoff_max_ms", INT, 10000, "the longest wait between two tries, in milliseconds"),
    Option("connect_timeout_ms", INT, 12000, "how long to wait for the connection, in milliseconds"),
    Option("socket_timeout_ms", INT, 60000, "how long to wait for the answer's next bytes, in milliseconds"),
)

SOURCE = (
    *REQUEST,
    Option("method", enum("GET", "POST"), "GET", "GET or POST"),
    Option("params", OBJECT, None, "query parameters, name = value (a POST's: its form body, as SeaTunnel's)"),
    Option("body", STRING, None, "a JSON text sent as the request's body (Content-Type: application/json)"),
    Option("format", enum("json", "text"), "text",
           "json: the answer parsed into schema's fields; text: the answer's body is one row, field content"),
    Option("content_field", STRING, None, "a JSONPath choosing the rows in the answer, e.g. $.store.book.*"),
    Option("json_field", OBJECT, None, "field name = JSONPath: each path gives one column, zipped into rows "
           "(needs schema)"),
    Option("pageing.page_field", STRING, None, "the query parameter that carries the page number"),
    Option("pageing.total_page_size", INT, None, "how many pages to read"),
    Option("pageing.batch_size", INT, None, "a page of fewer rows than this is the last"),
    Option("pageing.start_page_number", INT, 1, "the first page's number"),
    Option("poll_interval_millis", INT, None,
           "STREAMING: the wait between two polls, in milliseconds (default: the job's read interval)"),
    Option("enable_multi_lines", BOOL, False, "refused when true: the answer is read as one JSON document"),
    *schema_options(),      # the rows' fields (format = json)
)

SINK = (*REQUEST,)


def check_request(plugin) -> None:
    """The checks both plugins make of the options they share."""
    opts = plugin.opts
    if urlsplit(opts["url"]).scheme not in ("http", "https") or not urlsplit(opts["url"]).netloc:
        raise plugin.invalid("url", f"option 'url' must be an http:// or https:// address, got {opts['url']!r}")
    if opts["retry"] is not None and opts["retry"] < 0:
        raise plugin.invalid("retry", f"option 'retry' must be 0 or more, got {opts['retry']}")
    for name in ("retry_backoff_multiplier_ms", "retry_backoff_max_ms"):
        if opts[name] < 0:
            raise plugin.invalid(name, f"option '{name}' must be 0 or more milliseconds, got {opts[name]}")
    for name in ("connect_timeout_ms", "socket_timeout_ms"):
        if opts[name] <= 0:
            raise plugin.invalid(name, f"option '{name}' must be 1 or more milliseconds, got {opts[name]}")


__all__ = ["REQUEST", "SINK", "SOURCE", "check_request"]
