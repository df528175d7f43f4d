"""A Jdbc sink's save modes: the target prepared before its first batch, once per target.

**Once per target.** The save modes (create, recreate, empty the table, run custom_sql) are made
once for each target table, however many input tables write it, and recorded in the target
database, in ``seatide_sink_commits`` under the target's key (batch -1) before any batch goes in.
Whoever comes later finds the record and makes nothing: an attempt that resumes, a zombie, and an
input table added on resume whose target its shards already fill (finding 2 of issue 30: per input
table, its DROP_DATA emptied every row the others had streamed). A record an older SeaTide made per
input table (``earlier``) counts as the target's.

**Zombies.** A zombie (a replaced driver that still runs) held before this step would otherwise
empty or drop the table after its replacement committed into it (issue 21, finding 3). The step
runs under a lock both share in the target database (named_lock.py): the first applies the modes
and records them; the second finds the record.
"""

from __future__ import annotations

from seatide import failpoints
from seatide.connectors.jdbc.commit_record import CommitRecords
from seatide.connectors.jdbc.dialect import UnsupportedType
from seatide.connectors.jdbc.named_lock import named_lock
from seatide.connectors.jdbc.sink_session import lock_wait_s
from seatide.connectors.jdbc.spec import JdbcSinkError
from seatide.connectors.jdbc.target import JdbcTarget
from seatide.plugin.evolution import live_fields
from seatide.plugin.rowkind import HIDDEN_COLUMNS


def prepare_once(conn, route: JdbcTarget, schema, record: str, earlier: tuple[str, ...], records: CommitRecords,
                 sink_id: str) -> None:
    """Make the save modes of ``route``'s target from ``schema`` (the input's fields) unless
    ``record`` or one of ``earlier`` says they were made."""
    failpoints.hit("sink.save_modes")
    cursor = conn.cursor()
    with named_lock(cursor, route.dialect.name, record, lock_wait_s()):
        conn.rollback()        # a snapshot taken before the lock (MySQL) would not see the record
        if all(records.rows_of(cursor, key) is None for key in (record, *earlier)):
            _apply(conn, route, schema)
            records.insert(cursor, record, sink_id, -1, 0)
        conn.commit()
    # The decision (the record) and what it destroys commit together in the target's database:
    # past this point both stand, as past the protocol's door's step of the same name.
    failpoints.hit("sink.save_modes_decided")


def _apply(conn, route: JdbcTarget, schema) -> None:
    from pyspark.sql import types as T

    cursor = conn.cursor()
    spec, dialect, label, table = route.spec, route.dialect, route.label, route.table
    exists = dialect.table_exists(cursor, table)
    mode = spec.schema_save_mode
    if mode == "ERROR_WHEN_SCHEMA_NOT_EXIST" and not exists:
        raise JdbcSinkError(f"Jdbc sink: schema_save_mode is ERROR_WHEN_SCHEMA_NOT_EXIST and table "
                            f"{label} does not exist; create it or choose CREATE_SCHEMA_WHEN_NOT_EXIST")
    if mode == "RECREATE_SCHEMA" and exists:
        cursor.execute(f"DROP TABLE {route.quoted}")
        exists = False
    if mode in ("RECREATE_SCHEMA", "CREATE_SCHEMA_WHEN_NOT_EXIST") and not exists:
        fields = [f for f in live_fields(schema) if f.name not in HIDDEN_COLUMNS]
        renamed = T.StructType([T.StructField(route.column(f.name), f.dataType, f.nullable, f.metadata)
                                for f in fields])
        try:
            ddl = dialect.create_table(table, renamed, route.keys, with_key=spec.create_index)
        except UnsupportedType as exc:
            raise JdbcSinkError(f"Jdbc sink: cannot create table {label}{route.for_input()}: {exc}") from None
        if len(table) > 1:     # as SeaTunnel's save mode, the schema (database) too
            dialect.create_schema(cursor, table[0])
        cursor.execute(ddl)
        conn.commit()
        return
    if not exists:
        return
    data_mode = spec.data_save_mode
    if data_mode == "DROP_DATA":
        cursor.execute(f"DELETE FROM {route.quoted}")
    elif data_mode == "CUSTOM_PROCESSING":
        cursor.execute(spec.custom_sql)
    elif data_mode == "ERROR_WHEN_DATA_EXISTS":
        cursor.execute(f"SELECT 1 FROM {route.quoted} LIMIT 1")
        if cursor.fetchone() is not None:
            raise JdbcSinkError(f"Jdbc sink: data_save_mode is ERROR_WHEN_DATA_EXISTS and table "
                                f"{label} has rows; empty it or choose APPEND_DATA or DROP_DATA")
    conn.commit()


__all__ = ["prepare_once"]
