"""Every option name SeaTunnel's docs mention: table rows, config examples, `code` spans."""

from __future__ import annotations

import os
import re

DOCS = "/work/shared/reference/seatunnel-docs"
_NAME = r"[A-Za-z][A-Za-z0-9_.\-]*"
_TABLE_ROW = re.compile(rf"^\|\s*({_NAME})\s*\|", re.M)
_ASSIGNMENT = re.compile(rf"^\s*\"?({_NAME})\"?\s*[=:]", re.M)
_CODE_SPAN = re.compile(rf"`({_NAME})`")


def documented_option_names() -> set[str]:
    names: set[str] = set()
    for folder, _, files in os.walk(DOCS):
        for file in files:
            if file.endswith(".md"):
                with open(os.path.join(folder, file), encoding="utf-8") as handle:
                    text = handle.read()
                for pattern in (_TABLE_ROW, _ASSIGNMENT, _CODE_SPAN):
                    names.update(pattern.findall(text))
    return names
