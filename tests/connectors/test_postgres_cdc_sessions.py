"""The sessions Postgres-CDC reads through print values the same way whatever the server's and
the database's defaults: the snapshot's and lookups' connection and the replication connection
(whose walsender prints the stream's values) both have TimeZone = server-time-zone,
DateStyle = ISO and lc_monetary = C. Otherwise a timestamptz key printed in the stream one way
and looked up in another misses its row, and money under a comma-decimal locale is misread."""

from __future__ import annotations

from seatide.connectors.postgres_cdc.replication import connect_replication
from seatide.connectors.postgres_cdc.stream import connect
from tests.connectors.test_postgres_cdc import shop  # noqa: F401


def test_the_snapshot_and_the_replication_sessions_print_values_alike(private_postgres, shop):  # noqa: F811
    conn, url, db = shop
    conn.execute(f"ALTER DATABASE {db} SET lc_monetary = 'C.UTF-8'")
    conn.execute(f"ALTER DATABASE {db} SET TimeZone = 'Asia/Kolkata'")
    conn.execute(f"ALTER DATABASE {db} SET DateStyle = 'SQL, DMY'")
    config = {"host": "127.0.0.1", "port": private_postgres.port, "database": db, "user": "postgres",
              "password": "", "connect_timeout_ms": 10_000, "time_zone": "America/New_York"}
    expected = ("C", "America/New_York", "ISO, YMD")
    for session in (connect(config), connect_replication(config)):
        with session:
            shown = tuple(session.execute(f"SHOW {name}").fetchone()[0]
                          for name in ("lc_monetary", "TimeZone", "DateStyle"))
            assert shown == expected
