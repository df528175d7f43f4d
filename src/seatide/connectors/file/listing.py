"""Which files a LocalFile source reads: everything under ``path`` that is not hidden,
narrowed by ``file_filter_pattern`` and ``filename_extension``.

SeaTunnel's pattern is a regular expression over the file's name, or over its whole path
when the pattern starts with the source's ``path``. A batch read lists the files here and
hands Spark exactly those; a micro-batch read filters Spark's stream by each row's
``_metadata`` file name, so there the pattern runs as a Java regular expression.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from seatide.connectors.file.paths import is_hidden


@dataclass(frozen=True)
class FileFilter:
    root: str                    # the source's path, absolute
    pattern: str | None
    extension: str | None

    @property
    def active(self) -> bool:
        return bool(self.pattern or self.extension)

    @property
    def on_full_path(self) -> bool:
        return bool(self.pattern) and self.pattern.startswith(self.root)

    def matches(self, path: str) -> bool:
        name = os.path.basename(path)
        if self.extension and not name.endswith(_dotted(self.extension)):
            return False
        if self.pattern:
            return re.fullmatch(self.pattern, path if self.on_full_path else name) is not None
        return True

    def spark_condition(self):
        """The same test as a Column over a file source's ``_metadata`` (streaming reads)."""
        from pyspark.sql import functions as F

        condition = F.lit(True)
        name = F.col("_metadata.file_name")
        if self.extension:
            condition = condition & name.endswith(_dotted(self.extension))
        if self.pattern:
            subject = (F.regexp_replace(F.col("_metadata.file_path"), "^file:(//)?", "")
                       if self.on_full_path else name)
            condition = condition & subject.rlike(f"^(?:{self.pattern})$")
        return condition


def _dotted(extension: str) -> str:
    return extension if extension.startswith(".") else "." + extension


def list_files(root: str, file_filter: FileFilter, recursive: bool) -> list[str]:
    """The files Spark reads under ``root`` (or ``root`` itself), as Spark's file index picks
    them: hidden and staging entries never; subdirectories all when ``recursive``, else only
    ``key=value`` partition directories."""
    if os.path.isfile(root):
        return [root] if file_filter.matches(root) else []
    found = []
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not _hidden_dir(d) and (recursive or "=" in d))
        found.extend(os.path.join(directory, f) for f in sorted(files)
                     if not is_hidden(f) and file_filter.matches(os.path.join(directory, f)))
    return found


def _hidden_dir(name: str) -> bool:
    # As Spark's file index: "_key=value" is a partition directory, not a hidden one.
    return name.startswith(".") or (name.startswith("_") and "=" not in name)


def total_bytes(files: list[str]) -> int:
    return sum(os.path.getsize(f) for f in files)
