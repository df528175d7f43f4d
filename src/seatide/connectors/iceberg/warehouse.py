"""A warehouse on the local filesystem: the one place both the catalog config (``catalogs``) and
the hadoop catalog (``hadoop_catalog``) read it from, so neither imports the other back."""

from __future__ import annotations

import re


def local_warehouse(warehouse: str) -> str:
    """The directory of a ``file:`` or plain-path warehouse; ValueError for another scheme."""
    text = str(warehouse).strip()
    if text.startswith("file://"):
        text = text[len("file://"):]
    elif text.startswith("file:"):
        text = text[len("file:"):]
    elif re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", text):
        raise ValueError(f"warehouse {warehouse} is not on the local filesystem; SeaTide's hadoop catalog "
                         "takes a directory (/path or file:///path)")
    if not text.startswith("/"):
        raise ValueError(f"warehouse {warehouse} must be an absolute path (/path or file:///path)")
    return text.rstrip("/") or "/"


__all__ = ["local_warehouse"]
