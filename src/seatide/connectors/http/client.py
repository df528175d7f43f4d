"""Requests to an HTTP endpoint, tried again with backoff, failing with what a user can act on.

A connection error, a timeout and a 5xx answer are tried again, ``retry`` times, waiting
``retry_backoff_multiplier_ms * 2^(n-1)`` before the n-th retry, never more than
``retry_backoff_max_ms``. Any other answer that is not 2xx fails at once: a 4xx will not change
by asking again. A failure names the method, the status and the URL with its query, the values
of parameters named like credentials (token, auth, password, key, secret, ...) masked; header
values are never shown.
"""

from __future__ import annotations

import re
import time
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from seatide.plugin.base import PermanentError
from seatide.secrets import MASK, mask_message
from seatide.secrets.names import is_secret_param
_QUERY_PAIR = re.compile(r"(?P<pre>[?&;](?P<name>[\w.\-]+)=)(?P<value>[^&;\s'\"#)]+)")


class HttpError(RuntimeError):
    """The endpoint could not be reached, or answered 5xx, after every retry: the job may retry."""


class HttpAnswerError(HttpError, PermanentError):
    """The endpoint answered with a status a retry will not change (4xx, 3xx)."""


def is_credential(name: str) -> bool:
    """A query parameter or header whose value is never shown: the masker's rule for them (``is_secret_param``), so
    what this connector hides and what every view masks are one set."""
    return is_secret_param(name)


def shown_url(url: str, params: dict | None = None) -> str:
    """``url`` with ``params`` added, as a failure shows it: credential-named values masked."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True) + [(str(k), str(v)) for k, v in (params or {}).items()]
    masked = [(k, MASK if is_credential(k) else v) for k, v in query]
    netloc = parts.netloc.rsplit("@", 1)[-1]        # a user:password@ is never shown
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(masked, safe="*"), ""))


class Endpoint:
    """One plugin's way to its endpoint: a session kept alive, its timeouts and retry policy."""

    def __init__(self, opts, what: str):
        import requests

        self.what = what            # "Http source", "Http sink": the start of every failure
        self.retries = int(opts["retry"] or 0)
        self.multiplier_ms = opts["retry_backoff_multiplier_ms"]
        self.max_ms = opts["retry_backoff_max_ms"]
        self.timeout = (opts["connect_timeout_ms"] / 1000, opts["socket_timeout_ms"] / 1000)
        self.headers = {str(k): str(v) for k, v in (opts["headers"] or {}).items()}
        self.secrets = [v for k, v in self.headers.items() if is_credential(k) or k.lower() == "cookie"]
        self.session = requests.Session()

    def backoff_s(self, retry: int) -> float:
        """The wait before retry number ``retry`` (1, 2, ...)."""
        return min(self.multiplier_ms * 2 ** (retry - 1), self.max_ms) / 1000

    def send(self, method: str, url: str, *, params: dict | None = None, body: bytes | None = None,
             headers: dict | None = None, form: dict | None = None):
        """The answer (2xx) to one request, tried again as the policy says; raises HttpError.
        ``form``: sent as the body, x-www-form-urlencoded, instead of ``body``."""
        import requests

        sent = dict(self.headers, **(headers or {}))
        if body is not None:
            sent.setdefault("Content-Type", "application/json")
        failure = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s(attempt))
            try:
                answer = self.session.request(method, url, params=params, data=body if form is None else form,
                                              headers=sent, timeout=self.timeout)
            except requests.RequestException as exc:
                failure = f"could not be reached ({type(exc).__name__}: {self._masked(str(exc))})"
                continue
            if 200 <= answer.status_code < 300:
                return answer
            failure = f"answered {answer.status_code} {answer.reason}: {self._masked(answer.text[:300])}"
            if answer.status_code < 500:
                raise HttpAnswerError(self._failure(method, url, params, failure, attempt))
        raise HttpError(self._failure(method, url, params, failure, self.retries))

    def _failure(self, method: str, url: str, params: dict | None, failure: str, retries: int) -> str:
        tries = f" (after {retries} {'retry' if retries == 1 else 'retries'})" if retries else ""
        return f"{self.what}: {method} {shown_url(url, params)} {failure}{tries}"

    def _masked(self, text: str) -> str:
        # The library's own text may carry the URL (and so its query) or echo a header.
        text = _QUERY_PAIR.sub(lambda m: m.group("pre") + MASK if is_credential(m.group("name")) else m.group(0),
                               mask_message(text, self.secrets) or "")
        for value in self.secrets:
            text = text.replace(value, MASK)
        return text

    def close(self) -> None:
        self.session.close()


__all__ = ["Endpoint", "HttpAnswerError", "HttpError", "is_credential", "shown_url"]
