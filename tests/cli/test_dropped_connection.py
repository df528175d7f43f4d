"""A coordinator that closes the connection without an answer: every command says so in one line, never a traceback.

``HttpClient`` caught what urllib wraps (a refused connection, a timeout) but not what reading the answer raises
(``RemoteDisconnected``, a reset): ``status``, ``submit``, ``cancel``, ``list`` printed a Python traceback. A GET
is asked once more (a read is safe to repeat); a POST never is: a submit asked twice could run two jobs. Real
processes, as a user runs them, against a real TCP server on 127.0.0.1 that reads each request and closes.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples/batch_fake_to_console.conf")


class Closing:
    """Accepts, reads the request, sends ``reply`` (nothing: the connection is just closed) and closes."""

    def __init__(self, reply: bytes = b""):
        self.reply, self.requests = reply, []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:         # closed by the test's end
                return
            with conn:
                head = conn.recv(65536)
                self.requests.append(head.split(b"\r\n", 1)[0].decode())    # the request line: method and path
                conn.sendall(self.reply)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def closing():
    servers = []

    def make(reply: bytes = b"") -> Closing:
        servers.append(Closing(reply))
        return servers[-1]
    yield make
    for server in servers:
        server.close()


def cli(*words: str, module: str = "seatide.cli.main") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *words], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={k: v for k, v in os.environ.items() if k != "SEATIDE_API_TOKEN"})


def _one_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr


@pytest.mark.parametrize("words, asked", [
    (("status", "j1"), ["GET /api/v1/job-info/j1"] * 2),
    (("cancel", "j1"), ["POST /api/v1/stop-job"]),
    (("submit", EXAMPLE), ["POST /api/v1/jobs"]),     # the route an older coordinator lacks (cli.md)
    (("list",), ["GET /api/v1/jobs"] * 2),
])
def test_a_dropped_connection_is_one_line_and_a_post_is_never_sent_twice(closing, words, asked):
    server = closing()
    err = _one_line(cli(*words, "--cluster", server.url))
    assert server.url in err and "closed the connection without answering" in err, err
    assert [line.rsplit(" ", 1)[0] for line in server.requests] == asked      # a POST once: it may have been done
    if asked[0].startswith("POST"):
        assert "it may still have been done" in err and "seatide status JOB_ID" in err, err
    else:
        assert "check that its coordinators are up" in err, err


def test_seatunnels_submit_and_status_say_the_same(closing):
    server = closing()
    err = _one_line(cli("-m", "cluster", "-cn", server.url, "-c", EXAMPLE, module="seatide.cli.seatunnel"))
    assert "POST /jobs " in err and server.url in err, err
    assert [line.rsplit(" ", 1)[0] for line in server.requests] == ["POST /api/v1/jobs"]
    err = _one_line(cli("-cn", server.url, "-j", "j1", module="seatide.cli.seatunnel"))
    assert "GET /job-info/j1" in err, err


def test_an_answer_that_is_not_a_coordinators_json_is_one_line(closing):
    """--cluster pointed at another HTTP server (a web page on the port): its 200 was read as JSON and raised."""
    server = closing(b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\nContent-Length: 13\r\n\r\n<html></html>")
    err = _one_line(cli("status", "j1", "--cluster", server.url))
    assert "not a SeaTide coordinator's JSON" in err and "b'<html></html>'" in err and server.url in err, err


@pytest.mark.parametrize("words", [("submit", EXAMPLE), ("status", "j1"), ("list",)])
@pytest.mark.parametrize("url, why", [("http://coordinator:8O80", "'8O80'"), ("http://[::1", "Invalid IPv6 URL"),
                                      ("coordinator:8080", "http:// or https://"), ("http://", "names no host")])
def test_a_malformed_cluster_url_is_one_line_saying_so(words, url, why, capsys):
    """Review 7, F3: a port that is no number raised http.client's InvalidURL (an HTTPException) before anything
    was sent, and was told as a connection closed unanswered ("it may still have been done"); ``http://[::1`` was
    urllib's ValueError, a traceback. The URL is checked first: nothing is sent, nothing asked again, exit 2."""
    from seatide.cli.main import main

    assert main([*words, "--cluster", url]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"the cluster URL {url!r} is malformed" in err, err
    assert why in err and "nothing was sent" in err and "such as http://host:8080" in err, err
    assert "closed the connection" not in err and "may still have been done" not in err, err


def test_a_request_urllib_refuses_to_send_is_malformed_not_dropped(closing):
    """What the URL check cannot see: a path http.client refuses (a space in a job id) raised InvalidURL, told as
    a dropped connection and, for a GET, sent again; it is refused before sending, once."""
    from seatide.cli.args import CommandRefused
    from seatide.cli.http_client import HttpClient

    server = closing()
    with pytest.raises(CommandRefused, match="is malformed .*nothing was sent") as refused:
        HttpClient(server.url).call("GET", "/job-info/a b")
    assert refused.value.code == 2 and server.requests == [], server.requests
