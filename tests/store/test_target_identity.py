"""Target keys name a sink's target without DNS (a path by its real one), and ``overlaps`` errs towards overlap
(store/target_identity.py; outside review 8: a key that followed DNS changed between
attempts or versions, and a DROP_DATA ran over committed rows under the new key)."""

from __future__ import annotations

import os

from seatide.store.target_identity import UNKNOWN_TABLE, file_target, overlaps, query_table, server_host


def test_a_server_is_named_from_its_spelling_without_dns():
    assert {server_host(h) for h in ("localhost", "LOCALHOST", "127.0.0.1", "127.0.0.5", "[::1]")} == {"127.0.0.1"}
    # a name that does not resolve here is the same key as one that would: no lookup at all
    assert server_host("DB-Primary.example") == server_host("db-primary.example") == "db-primary.example"
    assert server_host("no-such-host.invalid") == "no-such-host.invalid"


def test_a_path_key_is_the_real_path_and_spelled_links_overlap(tmp_path):
    real = tmp_path / "real"
    (real / "b").mkdir(parents=True)
    os.symlink(real, tmp_path / "link")
    assert file_target(f"{real}/") == file_target(f"file://{real}") == str(real)
    assert file_target(str(tmp_path / "link")) == str(real)       # one directory, one key (review 8b, F9)
    assert overlaps(str(tmp_path / "link"), str(real / "b"))      # a key as spelled before: emptying it reaches b
    assert not overlaps(str(real), str(tmp_path / "realm"))


def test_a_query_names_its_table_or_any_table():
    assert query_table("INSERT LOW_PRIORITY IGNORE INTO s.`T` (a) VALUES (?)") == ("s", "T")
    assert query_table("insert into a values (1); insert into b values (2)") is None
    assert query_table("INSERT INTO t VALUES (?);") == ("t",)
    assert query_table("CALL write_rows(?)") is None


def test_jdbc_tables_overlap_without_case_and_the_unknown_table_overlaps_its_database():
    key = "jdbc:postgresql://127.0.0.1:5432/test/public/{}".format
    assert overlaps(key("Orders"), key("orders"))
    assert overlaps(key(UNKNOWN_TABLE), key("orders"))
    assert not overlaps(key("orders"), key("customers"))
    assert not overlaps(key("orders"), "jdbc:postgresql://127.0.0.1:5432/other/public/orders")


def test_one_server_spelled_by_name_and_by_address_overlaps():
    # outside review 8b, F1: keys stay spelling-only, but emptying db1.internal:t reaches 10.0.0.5:t when both
    # are one server; a name that cannot be looked up errs towards overlap, two addresses that differ do not
    import socket

    name = socket.gethostname()
    address = socket.getaddrinfo(name, None)[0][4][0]
    key = "jdbc:mysql://{}:3306/app//t".format
    assert overlaps(key(server_host(name)), key(server_host(address)))
    assert overlaps(key("no-such-host.invalid"), key("10.0.0.5"))
    assert not overlaps(key("10.0.0.5"), key("10.0.0.6"))
    assert not overlaps(key(server_host(name)), "jdbc:mysql://{}:3307/app//t".format(server_host(address)))


def test_an_unread_query_reaches_what_its_server_lets_it_write():
    # F2: MySQL has no schema below its databases, so a statement SeaTide cannot read may write any database
    # of the server; a PostgreSQL URL without a database connects to ``postgres``, as table keys say
    assert overlaps("jdbc:mysql://db1:3306/app//*", "jdbc:mysql://db1:3306/reporting//t")
    assert overlaps("jdbc:postgresql://db1:5432///*", "jdbc:postgresql://db1:5432/postgres/public/t")
    assert not overlaps("jdbc:postgresql://db1:5432/app//*", "jdbc:postgresql://db1:5432/reporting/public/t")


def test_a_quoted_table_name_is_read_whole_or_not_at_all():
    # F3: ``"order-items"`` was read as ``order``: the real table missed, an unrelated one matched
    assert query_table('INSERT INTO "order-items" VALUES (?, ?)') == ("order-items",)
    assert query_table('insert into `my table` (a) values (?)') == ("my table",)
    assert query_table('INSERT INTO public."Order Items" (a) VALUES (?)') == ("public", "Order Items")
    assert query_table("INSERT INTO t(a) VALUES (?)") == ("t",)
    assert query_table("INSERT INTO t-x VALUES (?)") is None      # not a name SQL reads: any table


def test_query_keys_of_earlier_seatides_are_any_table_of_their_database():
    # F4: before target keys, a query sink was ``…/db//query`` (or ``…/db/query`` earlier still)
    table = "jdbc:mysql://db1:3306/app//t"
    assert overlaps("jdbc:mysql://db1:3306/app//query", table)
    assert overlaps("jdbc:mysql://db1:3306/app/query", table)
    assert overlaps("jdbc:postgresql://db1:5432/app/query", "jdbc:postgresql://db1:5432/app/public/t")
    assert overlaps("jdbc:postgresql://db1:5432/app/public.t", "jdbc:postgresql://db1:5432/app/public/T")
    assert not overlaps("jdbc:postgresql://db1:5432/app/s.t", "jdbc:postgresql://db1:5432/app/public/t")


def test_a_paimon_table_lies_in_its_warehouse_directory():
    # outside review 8b, F7: a LocalFile DROP_DATA on the warehouse (or its database's directory) removes
    # the table's files; a Paimon key is ``<warehouse>#<database>.<table>``, its files ``<warehouse>/<db>.db/<table>``
    table = "/data/wh#sales.orders"
    assert overlaps("/data/wh", table) and overlaps(table, "/data/wh/sales.db")
    assert overlaps("/data/wh/sales.db/orders/bucket-0", table)
    assert not overlaps("/data/wh/other.db", table) and not overlaps("/data/whx", table)
