"""Http source: SeaTunnel's ``Http`` source options; an endpoint's answers read as rows, once.

The driver sends the request (GET or POST, ``headers``, ``params`` as a GET's query and a POST's
form body, as SeaTunnel's client sends them, else ``body`` as JSON) and reads the answer: with
``format = text`` its body is one row of one field, ``content``; with ``json`` it is parsed and
its rows chosen as below, then Spark parses each row into ``schema``'s fields (a field the row
lacks is null, a value of another type null too).

Which rows an answer holds (``format = json``):

* ``json_field``: field = JSONPath; each path's matches are one column, zipped into rows (the
  paths must match as many values each);
* ``content_field``: a JSONPath whose matches are the rows (one match that is a list: its items);
* neither: a list's items, or an object as one row.

With ``pageing.page_field`` the request is sent once per page, the page number in that query
parameter, from ``start_page_number``: up to page ``total_page_size`` when it is given, else
until a page holds fewer rows than ``batch_size`` (or none at all).

A BATCH job without ``checkpoint.interval`` reads on the driver; with checkpoints, and in
STREAMING, the endpoint is polled by micro-batches (``poll_stream``): once for a BATCH job, every
``poll_interval_millis`` (default: the job's read interval) in STREAMING.
"""

from __future__ import annotations

import json

from seatide.connectors.http.answers import PageReader
from seatide.connectors.http.options import SOURCE, check_request
from seatide.plugin.base import PermanentError, ReadContext, Source
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.plugin.schema import Schema, read_schema


class HttpSourceError(PermanentError):
    pass


def _jsonpath(plugin, option: str, text: str):
    from jsonpath_ng.exceptions import JsonPathParserError
    from jsonpath_ng.ext import parse

    try:
        return parse(text)
    except (JsonPathParserError, Exception) as exc:       # the parser raises several kinds
        raise plugin.invalid(option, f"option '{option}': {text!r} is not a JSONPath ({exc}); "
                                     "e.g. $.store.book.* or $.data[*].name") from None


@register
class HttpSource(Source):
    plugin_name = "Http"
    options = SOURCE

    def check(self) -> None:
        opts = self.opts
        check_request(self)
        if opts["poll_interval_millis"] is not None and opts["poll_interval_millis"] < 1:
            raise self.invalid("poll_interval_millis", "option 'poll_interval_millis' must be 1 or more milliseconds")
        if opts["enable_multi_lines"]:
            raise self.invalid("enable_multi_lines", "option 'enable_multi_lines = true' is not supported: the "
                                                     "answer is read as one JSON document; remove it")
        self._catalog = read_schema(opts, check_keys=self.check_keys)
        if opts["json_field"] is not None and self._catalog is None:
            raise self.invalid("json_field", "json_field needs a schema giving each of its fields' type: "
                                             "schema { fields { name = string, price = double } }")
        if opts["format"] == "json" and self._catalog is None:
            raise self.invalid("schema.fields", "format = json needs a schema: schema { fields { name = string, "
                                                "age = int } } (or format = text: the body as one field, content)")
        if opts["format"] == "text" and (opts["json_field"] is not None or opts["content_field"] is not None):
            raise self.invalid("format", "content_field and json_field choose rows in JSON: set format = json")
        paths = [str(name) for name, path in (opts["json_field"] or {}).items()
                 if _jsonpath(self, f"json_field.{name}", str(path))]
        missing = [n for n in paths if self._catalog and n not in self._catalog.struct.fieldNames()]
        if missing:
            raise self.invalid("json_field", f"json_field names {', '.join(missing)}, which schema.fields does not "
                                             "declare")
        if opts["content_field"]:
            _jsonpath(self, "content_field", opts["content_field"])
        if opts["body"] is not None:
            try:
                json.loads(opts["body"])
            except ValueError as exc:
                raise self.invalid("body", f"option 'body' must be JSON text ({exc})") from None
            if opts["method"] == "POST" and (opts["params"] or opts["pageing.page_field"]):
                self.notice("body", "not sent: a POST with params (or a page field) sends them as a form body "
                                    "(x-www-form-urlencoded), as SeaTunnel does; put the body's fields in params")
        paging = [k for k in ("total_page_size", "batch_size") if opts[f"pageing.{k}"] is not None]
        if paging and not opts["pageing.page_field"]:
            raise self.invalid("pageing.page_field", "pageing needs page_field, the query parameter that carries "
                                                     "the page number")
        for key in paging:
            if opts[f"pageing.{key}"] < 1:
                raise self.invalid(f"pageing.{key}", f"option 'pageing.{key}' must be 1 or more")

    def declared_schema(self) -> Schema | None:
        return self._catalog

    def schema(self):
        from pyspark.sql import types as T

        if self.opts["format"] == "text":
            return T.StructType([T.StructField("content", T.StringType())])
        return self._catalog.struct

    def read(self, ctx: ReadContext):
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        if ctx.micro_batch:
            raw = self._polled(ctx)
        else:
            raw = ctx.spark.createDataFrame([(p,) for p in self.pages()],
                                            T.StructType([T.StructField("value", T.StringType())]))
        if self.opts["format"] == "text":
            df = raw.select(F.col("value").alias("content"))
        else:
            # A page's rows as one JSON array, parsed by Spark and taken apart in order: one text
            # a page costs the driver less than one a row (bench/http_source.py).
            struct = self._catalog.struct
            parsed = raw.select(F.inline(F.from_json(F.col("value"), T.ArrayType(struct), {"mode": "PERMISSIVE"})))
            df = parsed.select(*[F.col(f"`{f.name}`") for f in struct.fields])
        return df.withColumn(ROW_KIND_COLUMN, F.lit(0).cast("tinyint"))

    def _polled(self, ctx: ReadContext):
        """The stream of pages the endpoint answers, polled (``poll_stream``)."""
        from seatide.connectors.http.poll_stream import SOURCE_NAME, HttpPollDataSource
        from seatide.plugin.base import use_python_data_source

        use_python_data_source(ctx.spark, HttpPollDataSource)
        interval = self.opts["poll_interval_millis"] or ctx.read_interval_ms
        given = {key: self.opts[key] for key in (o.key for o in SOURCE) if self.opts[key] is not None}
        options = {"options_json": json.dumps(given), "interval_ms": str(interval),
                   "bounded": "false" if ctx.unbounded else "true"}
        return ctx.spark.readStream.format(SOURCE_NAME).options(**options).schema("value string").load()

    def pages(self) -> list[str]:
        """Every page read, as text: its body (text), or its rows as a JSON array (json)."""
        return PageReader(self.opts).pages()


__all__ = ["HttpSource", "HttpSourceError"]
