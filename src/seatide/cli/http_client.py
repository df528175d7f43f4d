"""The CLI's client of a coordinator's REST API (``/api/v1``): one request, its answer or one line saying
what failed (``CommandRefused``), never a traceback."""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request

from seatide.cli.args import EXIT_BAD_CONFIG, EXIT_FAILED, CommandRefused as Refused


# A connection the coordinator closed without an answer (restarted or killed mid-request, a proxy's cut): raised
# from reading the answer, which urllib does not wrap in a URLError, they reached the user as a traceback.
DROPPED = (http.client.HTTPException, ConnectionError)
GET_TRIES = 2           # a read asked again once, after a pause: a coordinator restarting, a failover
AGAIN_AFTER_S = 0.5


class Answered(Refused):
    """A request the coordinator answered with an error status (``status``): a 404 for a path it does not serve
    is an older version's (a rolling upgrade), which a caller may ask the way that version understands.
    ``refusal``: the answer is a SeaTide route's own refusal (``{"error": ...}``), not a path the server lacks
    (``{"detail": "Not Found"}``, a proxy's page): a 404 "no job with id" is not an older version's."""

    def __init__(self, message: str, code: int, status: int, refusal: bool = False):
        super().__init__(message, code)
        self.status = status
        self.refusal = refusal

    @property
    def unserved(self) -> bool:
        """The server has no such route (an older version): 404, or 405 for a path it serves another method of."""
        return self.status in (404, 405) and not self.refusal


def malformed(base: str, why: str) -> Refused:
    return Refused(f"the cluster URL {base!r} is malformed ({why}); nothing was sent. Give a coordinator's URL, "
                   "such as http://host:8080 (--cluster, -cn or SEATIDE_CLUSTER)", EXIT_BAD_CONFIG)


def checked_url(base: str) -> str:
    """``base`` if it is a URL a request can be sent to, else ``malformed``: http.client's InvalidURL (a port
    that is no number) is an HTTPException, raised before anything is sent, and was told as a connection closed
    unanswered ("it may still have been done"); urllib's ValueError (``http://[::1``) was a traceback."""
    try:
        parts = urllib.parse.urlsplit(base)
        parts.port          # a port that is no number, or out of range: ValueError
    except ValueError as exc:
        raise malformed(base, str(exc)) from None
    if parts.scheme not in ("http", "https"):
        raise malformed(base, "it does not start with http:// or https://")
    if not parts.hostname:
        raise malformed(base, "it names no host")
    if any(ch.isspace() or not ch.isprintable() for ch in base):
        raise malformed(base, "it holds a space or a control character")
    return base


class HttpClient:
    def __init__(self, base: str, token: str | None = None, timeout_s: float = 30.0):
        self.base = checked_url(base).rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    def call(self, method: str, path: str, body: dict | None = None):
        """The answer to one request, or ``Refused`` with one line saying what failed. Only a GET is asked again
        (once) when the connection drops unanswered: a POST may have been carried out, and nothing makes a second
        one harmless (a submit without --job-id is given a new id: asked twice, two jobs run)."""
        for tries in range(1, GET_TRIES + 1):
            try:
                return self._call(method, path, body)
            except http.client.InvalidURL as exc:    # raised before anything is sent (a path with a space)
                raise malformed(self.base + "/api/v1" + path, str(exc)) from None
            except DROPPED as exc:
                if method != "GET" or tries == GET_TRIES:
                    raise Refused(self._unanswered(method, path, exc)) from None
                time.sleep(AGAIN_AFTER_S)

    def _call(self, method: str, path: str, body: dict | None):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            request = urllib.request.Request(self.base + "/api/v1" + path, data=data, method=method, headers=headers)
        except ValueError as exc:
            raise malformed(self.base + "/api/v1" + path, str(exc)) from None
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                answer = response.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 401:
                raise Refused(self._unauthorised()) from None
            try:
                payload = json.loads(exc.read() or b"{}")
            except (ValueError, *DROPPED):      # not JSON, or cut off: the status line says enough
                payload = {}
            message = (payload.get("detail") or payload.get("error") if isinstance(payload, dict) else None) or str(exc)
            raise Answered(message, EXIT_BAD_CONFIG if exc.code in (400, 413, 422) else EXIT_FAILED, exc.code,
                           refusal=isinstance(payload, dict) and "error" in payload) from None
        except TimeoutError:
            raise Refused(self._unanswered(method, path)) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise Refused(self._unanswered(method, path)) from None
            if isinstance(exc.reason, ConnectionError) and not isinstance(exc.reason, ConnectionRefusedError):
                raise exc.reason from None      # cut while the request was sent: it may have arrived
            raise Refused(f"cannot reach the cluster at {self.base}: {exc.reason}") from None
        try:
            return json.loads(answer or b"null")
        except ValueError:
            raise Refused(f"{self.base} answered {method} {path} with what is not a SeaTide coordinator's JSON "
                          f"({answer[:60]!r}): check that --cluster (or SEATIDE_CLUSTER) is a coordinator's URL, "
                          "such as http://host:8080") from None

    def _unanswered(self, method: str, path: str, dropped: BaseException | None = None) -> str:
        # A request sent and not answered may still have been carried out: asking again blind could
        # do it twice (a second resume, a second submit), so the way on is to look first.
        what = f"{method} {path}"
        how = (f"did not answer {what} within {self.timeout_s:g} s" if dropped is None else
               f"closed the connection without answering {what} ({type(dropped).__name__}: {dropped})")
        if method == "GET":
            return (f"the cluster at {self.base} {how}; check that its coordinators are up "
                    "(seatide list --cluster ...) and their logs, and ask again")
        return (f"the cluster at {self.base} {how}: it may still have been done. Look before asking "
                f"again: seatide status JOB_ID --cluster {self.base} (or seatide list), and the coordinator's log")

    def _unauthorised(self) -> str:
        if self.token:
            return (f"the cluster at {self.base} refused the API token (401): check SEATIDE_API_TOKEN or the "
                    "file given with --api-token-file against the coordinator's")
        return (f"the cluster at {self.base} requires an API token (401): set SEATIDE_API_TOKEN or pass "
                "--api-token-file PATH")
