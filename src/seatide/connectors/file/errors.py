"""The error a LocalFile connector raises at run time when retrying cannot help."""

from __future__ import annotations

from seatide.plugin.base import PermanentError


class LocalFileError(PermanentError):
    """A missing path or field, or files that contradict the options; the message says which."""
