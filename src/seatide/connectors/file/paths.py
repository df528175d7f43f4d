"""Local paths as SeaTunnel users write them (``/data/x`` or ``file:///data/x``)."""

from __future__ import annotations

import os
import re

STAGING_DIR = ".seatide-staging"   # starts with '.', so Spark's file sources never read it


def local_path(text: str) -> str:
    """Absolute local path for ``text``; ValueError for another filesystem's URI."""
    value = text.strip()
    if value.startswith("file:"):
        value = re.sub(r"^file:(//)?", "", value)
    elif re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", value):
        raise ValueError(f"'{text}' is not a local path; LocalFile reads and writes the local "
                         "filesystem (write /dir or file:///dir)")
    if not value:
        raise ValueError("the path is empty")
    return os.path.abspath(os.path.expanduser(value))


def spark_uri(path: str) -> str:
    """Spark's default filesystem may be HDFS; a file: URI always means the local disk."""
    return "file://" + path


def is_hidden(name: str) -> bool:
    """Names Spark's file sources skip: staging areas, _SUCCESS, checksum files."""
    return name.startswith((".", "_"))
