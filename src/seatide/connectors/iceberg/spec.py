"""What one Iceberg sink writes, its options read once (``IcebergSink.spec``), and the error it
fails with. Below every other module of the sink: they take a spec, none imports the plugin."""

from __future__ import annotations

from dataclasses import dataclass

from seatide.plugin.base import PermanentError


class IcebergSinkError(PermanentError):
    """A table or option that contradicts the input; the message says what to change."""


@dataclass(frozen=True)
class IcebergSinkSpec:
    catalog_name: str
    catalog_config: dict
    namespace: str
    table: str
    write_props: dict
    auto_create_props: dict
    primary_keys: tuple[str, ...]
    partition_keys: tuple[str, ...]
    upsert: bool
    schema_evolution: bool
    case_sensitive: bool
    branch: str | None
    schema_save_mode: str
    data_save_mode: str
    expire_older_than_ms: int | None    # maintenance after commits (None: never)
    retain_last: int
    rewrite_every: int                  # compact small files every N commits (0: never)
    rewrite_target_bytes: int

    @property
    def name(self) -> str:
        return f"{self.namespace}.{self.table}"

    def column(self, name: str) -> str:
        """``name`` as columns are matched (``case_sensitive``)."""
        return name if self.case_sensitive else name.lower()


def split_keys(text: str | None) -> tuple[str, ...]:
    return tuple(k.strip() for k in (text or "").split(",") if k.strip())


__all__ = ["IcebergSinkError", "IcebergSinkSpec", "split_keys"]
