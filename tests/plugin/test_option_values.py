"""An option's value is the plain value of its type, whatever the job file's parser made of it."""

from __future__ import annotations

import socket

from seatide.config.loader import parse_job_tree
from seatide.plugin.options import FLOAT, INT


def _written(text: str):
    (block,) = parse_job_tree(f"sink {{ Console {{ value = {text} }} }}")["sink"].values()
    return block["value"]


def test_an_integer_option_is_an_exact_int_that_a_socket_call_takes():
    written = _written("0023999")
    assert type(written) is not int                 # the parser keeps the number as written
    port = INT(written)
    assert type(port) is int and port == 23999
    # C code that checks for an exact int (redis-py 8 passes the port on to getaddrinfo as given)
    socket.getaddrinfo("127.0.0.1", port, type=socket.SOCK_STREAM)


def test_a_number_option_is_an_exact_float():
    value = FLOAT(_written("0.10"))
    assert type(value) is float and value == 0.1
