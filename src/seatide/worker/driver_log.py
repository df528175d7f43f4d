"""An attempt's log file, as its driver's output reaches it: every line masked.

A driver's stdout and stderr carry more than its Python logging, which masks the job's
secrets itself (``secrets.MaskingFilter``): the JVM's log4j lines (Spark quoting a
database's error, a URL), ``print`` and whatever a UDF writes. None of those pass a Python
filter, so the worker does not let the driver write its log file: the driver's output (and
its JVM's, which inherits the same pipe) comes through a pipe, and the worker writes each
line to the file masked by the job's secrets (``secrets.LineMasker``: a private key's block and a
multi-line secret value, which no one line shows whole, are masked line by line too).

The relay thread reads until every holder of the pipe has closed it (the driver and its
JVM), then closes the file. A line is written as soon as it is complete, so the log is as
current as before; output without a final newline is written when the pipe closes.
"""

from __future__ import annotations

import logging
import threading
from typing import IO, Iterable

from seatide.secrets import LineMasker, MaskingFilter

log = logging.getLogger(__name__)
# The worker's own lines, many jobs' at once: masked by the secrets of the attempts it runs (each held from launch
# to reaping) and every credential-named pair (review 9, F1: a warm-driver misfit named a setting's value). A
# logger's filter sees only its own records: each worker module that logs a job's text is listed.
LOG_MASKING = MaskingFilter()
for _name in ("seatide.worker.agent", "seatide.worker.launch", "seatide.worker.presence", "seatide.worker.warm_pool",
              __name__):
    logging.getLogger(_name).addFilter(LOG_MASKING)


class DriverLog:
    """``path`` (opened for appending when the first output arrives), masked by ``secrets``."""

    def __init__(self, path: str, secrets: Iterable[str]):
        self.path = path
        self.secrets = frozenset(secrets)
        self._masker = LineMasker(self.secrets)       # its state runs across lines: one writer, one stream
        self._file: IO[bytes] | None = None
        self._lock = threading.Lock()
        self.relay: threading.Thread | None = None

    def write(self, line: bytes) -> None:
        """One line of output (bytes as the driver wrote them), masked."""
        text = line.decode("utf-8", errors="surrogateescape")
        with self._lock:
            masked = self._masker.line(text)
            if self._file is None:
                self._file = open(self.path, "ab", buffering=0)
            self._file.write(masked.encode("utf-8", errors="surrogateescape"))

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def copy(self, pipe: IO[bytes], name: str) -> threading.Thread:
        """Relay ``pipe`` into the file on a thread of its own, until the pipe's end of file."""
        self.relay = threading.Thread(target=self._relay, args=(pipe,), name=name, daemon=True)
        self.relay.start()
        return self.relay

    def _relay(self, pipe: IO[bytes]) -> None:
        failed = False
        try:
            for line in iter(pipe.readline, b""):
                if failed:
                    continue       # keep reading: a driver whose pipe fills up would block
                try:
                    self.write(line)
                except Exception:    # noqa: BLE001 - a full disk must not stop the driver
                    log.exception("the log %s cannot be written; the driver's further output is dropped",
                                  self.path)
                    failed = True
        finally:
            pipe.close()
            self.close()
