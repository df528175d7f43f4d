"""Writing deletes into a primary-key table with pypaimon.

pypaimon's writer takes each row's kind (insert, update, delete) only from a table column named
by the ``rowkind.field`` table option: a column readers would see, which SeaTunnel's tables do
not have. SeaTide writes a batch's net change per key instead (``changes``): its deleted keys in
one write, its upserted rows in another, and says which kind each write is here (``writing``). The writer
asks ``pypaimon.write.row_kind.row_kinds(options, data)`` for the kinds of every piece it
buffers, at the moment it buffers it, so a wrapper of that one function answers with the kind
of the write in progress (a context variable) and leaves every other caller to pypaimon.

pypaimon is pinned (pyproject.toml); tests/connectors/test_paimon_sink.py's deletes fail if a
new version stops asking this function.
"""

from __future__ import annotations

import contextlib
import contextvars

_KIND: contextvars.ContextVar[int | None] = contextvars.ContextVar("seatide_paimon_row_kind", default=None)
_INSTALLED = False


def _install() -> None:
    global _INSTALLED
    if _INSTALLED:
        return
    import pypaimon.write.row_kind as module

    original = module.row_kinds

    def row_kinds(options, data):
        kind = _KIND.get()
        return original(options, data) if kind is None else [kind] * data.num_rows

    module.row_kinds = row_kinds
    _INSTALLED = True


def count_deletes(messages: list) -> None:
    """Set each new data file's ``delete_row_count`` from its rows' kinds. pypaimon writes 0 there
    whatever the kinds; a reader takes a lone file of a bucket with 0 for one needing no merge and
    returns its deleted rows as rows (``split_generator._without_delete_row``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for message in messages:
        for meta in message.new_files:
            kinds = _value_kinds(meta.file_path)
            if kinds is None:          # not counted: never taken for a file without deletes
                meta.delete_row_count = meta.row_count
                continue
            deleted = pc.sum(pc.is_in(kinds, value_set=pa.array([1, 3], kinds.type))).as_py()
            meta.delete_row_count = int(deleted or 0)


def _value_kinds(path: str):
    """The ``_VALUE_KIND`` column of a data file (None for a format read here only whole)."""
    import pyarrow.parquet as pq

    if path.endswith(".parquet"):
        return pq.ParquetFile(path).read(columns=["_VALUE_KIND"]).column("_VALUE_KIND")
    if path.endswith(".orc"):
        import pyarrow.orc as orc

        return orc.read_table(path, columns=["_VALUE_KIND"]).column("_VALUE_KIND")
    return None


@contextlib.contextmanager
def writing(kind: int):
    """Rows written by pypaimon inside this block are of ``kind`` (0 insert .. 3 delete)."""
    _install()
    token = _KIND.set(kind)
    try:
        yield
    finally:
        _KIND.reset(token)


__all__ = ["count_deletes", "writing"]
