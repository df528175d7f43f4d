"""A PySpark Python data source that polls an HTTP endpoint: the Http source's micro-batches.

The offset is ``{"poll": n}``: n requests (each with its pages) admitted so far. A STREAMING job
admits the next one when ``poll_interval_millis`` has passed since the last (at Spark's trigger,
``read_interval_ms``, so never more often than that); a BATCH job with checkpoints admits one,
then its stream ends. A micro-batch's partition sends its polls' requests on a Python worker and
yields each page as text (its body, or its rows as a JSON array), parsed by the source's frame.

Not exactly once: an endpoint keeps no position, so a batch replayed after a crash asks again and
gets what the endpoint answers then. The classes live in an importable module because Spark's
Python workers unpickle them.
"""

from __future__ import annotations

import json
import time
from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, SupportsTriggerAvailableNow

SOURCE_NAME = "seatide_http_poll"


class Poll(InputPartition):
    def __init__(self, number: int):
        super().__init__(number)
        self.number = number


class HttpPollDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self):
        return "value string"

    def streamReader(self, schema) -> "HttpPollReader":
        return HttpPollReader(self.options)


class HttpPollReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options):
        self.options = dict(options)
        self.interval_s = int(self.options["interval_ms"]) / 1000
        self.bounded = self.options["bounded"] == "true"
        self._last = None           # when the last poll was admitted (this process)
        self._target = None

    def initialOffset(self) -> dict:
        return {"poll": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = 1

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        done = int(start["poll"])
        if self.bounded or self._target is not None:
            return {"poll": max(done, 1)}
        now = time.monotonic()
        if self._last is not None and now - self._last < self.interval_s:
            return {"poll": done}
        self._last = now
        return {"poll": done + 1}

    def partitions(self, start: dict, end: dict) -> list[Poll]:
        return [Poll(n) for n in range(int(start["poll"]) + 1, int(end["poll"]) + 1)]

    def read(self, partition: Poll) -> Iterator[tuple]:
        from seatide.connectors.http.answers import reader_from_options
        from seatide.plugin.base import PermanentError, permanent_in_worker

        try:
            pages = reader_from_options(json.loads(self.options["options_json"])).pages()
        except PermanentError as exc:       # a 4xx: the driver fails the job, not retries it
            raise permanent_in_worker(str(exc)) from None
        for page in pages:
            yield (page,)

    def commit(self, end: dict) -> None:
        """Nothing to release: the endpoint keeps nothing for SeaTide."""


__all__ = ["HttpPollDataSource", "SOURCE_NAME"]
