"""A pipeline checkpoint directory's ``seatide.json`` (written by ``runtime/pipeline_run.py``: its lineage,
fingerprint and mode), read for a resume's checks in one place: a hand-edited or corrupt file is a
refusal naming it and what is wrong, never a traceback in whichever check read it first."""

from __future__ import annotations

import json
import os

# The keys a check compares or a driver reads, and the type each is written with. Every file has a
# lineage: a driver reads it (runtime/pipeline_run.py), and one without it failed every retry on a
# KeyError (review 5, F4).
_TEXT_KEYS = ("fingerprint", "lineage", "origin")


def checkpoint_metadata(directory: str) -> dict | None:
    """``directory``'s seatide.json, or None where there is none; ValueError("<file> is unreadable
    (what is wrong)") for one that is no JSON object, holds no lineage, or whose fingerprint, lineage or
    origin is no string."""
    path = os.path.join(directory, "seatide.json")
    try:
        with open(path) as handle:
            meta = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path} is unreadable ({exc})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path} is unreadable (not a JSON object but {_kind(meta)})")
    if "lineage" not in meta:
        raise ValueError(f"{path} is unreadable (it holds no lineage)")
    for key in _TEXT_KEYS:
        if key in meta and not isinstance(meta[key], str):
            raise ValueError(f"{path} is unreadable (its {key} is {_kind(meta[key])}, not a string)")
    return meta


def _kind(value) -> str:
    return {list: "a list", dict: "an object", str: "a string", bool: "a boolean", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), f"a {type(value).__name__}")
