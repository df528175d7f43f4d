"""What the two CDC sources share about their table lists."""

from __future__ import annotations

import re
from typing import Iterable

from seatide.plugin.options import STRING, Option

# Characters of a pattern (Flink CDC's regular expressions, glob stars), none of them in a table
# name written without quotes.
_PATTERN = re.compile(r"[*?\[\]|^(){}+\\]")

NEW_TABLES = ("A table created later is captured by adding it to table-names and resuming the job with "
              "the new config (seatide resume JOB --config job.conf): it gets a snapshot of its own, and "
              "the other tables keep their positions")

# SeaTunnel's CDC pages have no pattern option; one brought from elsewhere is refused, not ignored.
PATTERN_OPTION = Option("table-pattern", STRING, None,
                        "not supported: table-names lists exact names. " + NEW_TABLES)


def split_names(entries: Iterable[str]) -> list[str]:
    """``table-names`` as a list of names: SeaTunnel's pages also write several tables in one entry,
    separated by commas (``["db.s.t1,db.s.t2"]``)."""
    return [name.strip() for entry in entries for name in str(entry).split(",") if name.strip()]


def pattern_refusal(names: Iterable[str], pattern_option: str | None) -> str | None:
    """Why the table list cannot be used, when it asks for tables by pattern; None when it names tables."""
    if pattern_option is not None:
        return (f"table-pattern = \"{pattern_option}\" is not supported: SeaTunnel's CDC sources capture "
                f"the tables table-names lists by exact name, and so does SeaTide: list them there. {NEW_TABLES}")
    for name in names:
        if _PATTERN.search(name):
            return (f"table-names holds '{name}', which looks like a pattern: table-names lists exact table "
                    f"names, as in SeaTunnel: list each table. {NEW_TABLES}")
    return None


__all__ = ["NEW_TABLES", "PATTERN_OPTION", "pattern_refusal", "split_names"]
