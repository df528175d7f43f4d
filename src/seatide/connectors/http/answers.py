"""What the Http source reads: the endpoint's answers, page after page, and the rows in them.

Used on the driver (a BATCH job without checkpoints) and on a Spark Python worker (a micro-batch
of ``poll_stream``), from the source's options, checked by the source when the job was loaded.
"""

from __future__ import annotations

import json
import logging

from seatide.connectors.http.client import Endpoint, HttpAnswerError, shown_url
from seatide.connectors.http.options import SOURCE

log = logging.getLogger(__name__)


class PageReader:
    def __init__(self, opts):
        from jsonpath_ng.ext import parse

        self.opts = opts
        self._paths = {str(name): parse(str(path)) for name, path in (opts["json_field"] or {}).items()}
        self._content = parse(opts["content_field"]) if opts["content_field"] else None

    def pages(self) -> list[str]:
        """Every page read, as text: its body (text), or its rows as a JSON array (json)."""
        opts = self.opts
        endpoint = Endpoint(opts, "Http source")
        body = opts["body"].encode("utf-8") if opts["body"] is not None else None
        field, total, size = opts["pageing.page_field"], opts["pageing.total_page_size"], opts["pageing.batch_size"]
        params = {str(k): str(v) for k, v in (opts["params"] or {}).items()}
        out: list[str] = []
        count = 0
        page = opts["pageing.start_page_number"]
        try:
            while True:
                if field:
                    params[field] = str(page)
                if opts["method"] == "POST" and params:
                    # SeaTunnel's client sends a POST's params (the page number too) as a form
                    # body, and then not the JSON body (HttpSource.check warns of that)
                    answer = endpoint.send("POST", opts["url"], form=params)
                else:
                    answer = endpoint.send(opts["method"], opts["url"], params=params or None, body=body)
                rows = self._rows(answer.text, shown_url(opts["url"], params))
                if rows:
                    out.append(answer.text if opts["format"] == "text" else json.dumps(rows))
                    count += len(rows)
                if not field or not rows or (total is not None and page >= total) or \
                        (total is None and size is not None and len(rows) < size):
                    break
                page += 1
        finally:
            endpoint.close()
        log.info("Http source: %d rows in %d pages from %s", count, len(out), shown_url(opts["url"]))
        return out

    def _rows(self, text: str, where: str) -> list:
        """The rows of one answer: the body itself (text), or its rows' objects (json)."""
        if self.opts["format"] == "text":
            return [text] if text else []
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise HttpAnswerError(f"Http source: {where} answered with a body that is not JSON ({exc}): "
                                  f"{text[:200]!r}; use format = text to read it as it is") from None
        if self._paths:
            columns = {name: [m.value for m in path.find(document)] for name, path in self._paths.items()}
            counts = {len(values) for values in columns.values()}
            if len(counts) > 1:
                raise HttpAnswerError(f"Http source: {where}: the json_field paths match different numbers of "
                                      "values (" + ", ".join(f"{n}: {len(v)}" for n, v in columns.items())
                                      + "), so they cannot be zipped into rows")
            names = list(columns)
            rows = [dict(zip(names, values)) for values in zip(*columns.values())]
        elif self._content is not None:
            rows = [m.value for m in self._content.find(document)]
            if len(rows) == 1 and isinstance(rows[0], list):
                rows = rows[0]
        else:
            rows = document if isinstance(document, list) else [document]
        strange = next((r for r in rows if not isinstance(r, dict)), None)
        if strange is not None:
            raise HttpAnswerError(f"Http source: {where}: a row is {json.dumps(strange)[:100]}, not a JSON object; "
                                  "choose the objects with content_field (e.g. $.data.*) or json_field")
        return rows




def reader_from_options(options: dict) -> PageReader:
    """The reader of the source's options as given (``poll_stream`` sends them to its workers)."""
    from seatide.plugin.options import read_options

    return PageReader(read_options(options, SOURCE))


__all__ = ["PageReader", "reader_from_options"]
