"""A Paimon warehouse on the local filesystem, opened with pypaimon's filesystem catalog."""

from __future__ import annotations

import os
from urllib.parse import urlparse

from seatide.plugin.base import PermanentError


class WarehouseError(ValueError):
    """The warehouse option names something SeaTide cannot open."""


class PaimonError(PermanentError):
    """A table and the job disagree; the message names the table and the way out."""


def warehouse_path(text: str) -> str:
    """The local directory of ``warehouse`` (``/x``, ``file:/x`` or ``file:///x``)."""
    text = str(text).strip()
    parsed = urlparse(text)
    if parsed.scheme in ("", "file"):
        path = parsed.path if parsed.scheme else text
        if not os.path.isabs(path):
            raise WarehouseError(f"{text!r} is not an absolute path; give /dir or file:///dir")
        return os.path.normpath(path)
    raise WarehouseError(f"{text!r}: SeaTide reaches a Paimon warehouse on the local filesystem only "
                         f"(a path or file:///path, not {parsed.scheme}://)")


def open_catalog(warehouse: str):
    """pypaimon's filesystem catalog over the warehouse."""
    from pypaimon import CatalogFactory

    return CatalogFactory.create({"warehouse": warehouse_path(warehouse)})


def get_table(catalog, database: str, table: str):
    """The table, or None when it (or its database) does not exist."""
    from pypaimon.catalog.catalog_exception import DatabaseNotExistException, TableNotExistException

    try:
        return catalog.get_table(f"{database}.{table}")
    except (TableNotExistException, DatabaseNotExistException):
        return None


def table_or_fail(catalog, database: str, table: str, who: str):
    found = get_table(catalog, database, table)
    if found is None:
        raise PaimonError(f"{who}: table {database}.{table} does not exist in the warehouse")
    return found


__all__ = ["PaimonError", "WarehouseError", "get_table", "open_catalog", "table_or_fail", "warehouse_path"]
