"""What a LocalFile target is written with, resolved from a sink's options once (``LocalFileSink.spec``)."""

from __future__ import annotations

from dataclasses import dataclass

from seatide.connectors.file.naming import FileNamer

SCHEMA_SAVE_MODES = ("RECREATE_SCHEMA", "CREATE_SCHEMA_WHEN_NOT_EXIST", "ERROR_WHEN_SCHEMA_NOT_EXIST", "IGNORE")
DATA_SAVE_MODES = ("DROP_DATA", "APPEND_DATA", "ERROR_WHEN_DATA_EXISTS")


@dataclass(frozen=True)
class FileSinkSpec:
    """Everything a file target needs, resolved from the options once."""

    root: str
    file_format: str
    spark_options: dict
    namer: FileNamer
    extension: str | None
    partition_by: tuple[str, ...]
    partition_expression: str | None
    partition_fields_in_file: bool
    sink_columns: tuple[str, ...] | None
    max_rows_per_file: int
    single_file: bool
    empty_file_when_no_data: bool
    schema_save_mode: str
    data_save_mode: str


__all__ = ["DATA_SAVE_MODES", "FileSinkSpec", "SCHEMA_SAVE_MODES"]
