"""A batch's changes to a primary-key table, as one change per key (on the driver, in Arrow).

The last change of each key wins, by the source's order (``__row_seq``), which the source
numbers across all its tables: a key moved between shards merged into this table is ordered by
it too, whatever order the rows arrive in; without it, the order the rows were read in. Two
changes of one key with the same number cannot be ordered and fail the batch. A key whose last
change is an insert or an update's after-image is upserted; one whose last change is a delete
or an update's before-image (the key moved, or the row was deleted) is deleted. Paimon's
deduplicate merge then keeps, for each key, the newest record across batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from seatide.connectors.paimon.warehouse import PaimonError
from seatide.plugin.rowkind import ROW_KIND_COLUMN, ROW_SEQ_COLUMN, RowKind

if TYPE_CHECKING:
    import pyarrow as pa

_POS, _ORDER = "__seatide_pos", "__seatide_order"


@dataclass(frozen=True)
class NetChanges:
    upserts: "pa.Table"     # the rows to write as inserts (user columns)
    deletes: "pa.Table"     # the deleted keys' last images (user columns)


def user_part(data: "pa.Table") -> "pa.Table":
    return data.drop_columns([c for c in (ROW_KIND_COLUMN, ROW_SEQ_COLUMN) if c in data.column_names])


def net_changes(data: "pa.Table", keys: list[str], where: str) -> NetChanges:
    """``data``: the batch conformed to the table (``keys`` are its column names), with the hidden
    ``__row_kind`` and, when the source numbers its changes, ``__row_seq``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for key in keys:
        if data.column(key).null_count:
            raise PaimonError(f"Paimon sink: a row of the batch has no value for key column {key} of {where}")
    numbered = ROW_SEQ_COLUMN in data.column_names
    order = data.column(ROW_SEQ_COLUMN) if numbered else pa.array(range(data.num_rows), pa.int64())
    framed = pa.table({**{k: data.column(k) for k in keys}, _POS: pa.array(range(data.num_rows), pa.int64()),
                       _ORDER: order})
    framed = framed.take(pc.sort_indices(framed, sort_keys=[(_ORDER, "ascending")]))
    grouped = framed.group_by(keys, use_threads=False).aggregate(
        [(_POS, "last"), (_ORDER, "count"), (_ORDER, "count_distinct")])
    if numbered and not pc.all(pc.equal(grouped.column(f"{_ORDER}_count"),
                                        grouped.column(f"{_ORDER}_count_distinct"))).as_py():
        raise PaimonError(f"Paimon sink: two changes of one key of {where} carry the same __row_seq in one batch, "
                          "so which is last cannot be known (a source that numbers its tables apart writes into "
                          "one table: give each its own table)")
    last = grouped.column(f"{_POS}_last")
    net = data.take(last.take(pc.sort_indices(last)))      # in the batch's order: files sort by key anyway
    kinds = net.column(ROW_KIND_COLUMN)
    removed = pc.is_in(kinds, pa.array([RowKind.UPDATE_BEFORE, RowKind.DELETE], kinds.type))
    return NetChanges(upserts=user_part(net.filter(pc.invert(removed))), deletes=user_part(net.filter(removed)))


__all__ = ["NetChanges", "net_changes", "user_part"]
