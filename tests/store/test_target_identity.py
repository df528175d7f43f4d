"""Target keys name a sink's target from its spelling alone, and ``overlaps`` errs towards overlap
(store/target_identity.py; outside review 8: a key that followed DNS or a symlink changed between
attempts or versions, and a DROP_DATA ran over committed rows under the new key)."""

from __future__ import annotations

import os

from seatide.store.target_identity import UNKNOWN_TABLE, file_target, overlaps, query_table, server_host


def test_a_server_is_named_from_its_spelling_without_dns():
    assert {server_host(h) for h in ("localhost", "LOCALHOST", "127.0.0.1", "127.0.0.5", "[::1]")} == {"127.0.0.1"}
    # a name that does not resolve here is the same key as one that would: no lookup at all
    assert server_host("DB-Primary.example") == server_host("db-primary.example") == "db-primary.example"
    assert server_host("no-such-host.invalid") == "no-such-host.invalid"


def test_a_path_key_is_the_absolute_path_as_spelled_and_links_overlap(tmp_path):
    real = tmp_path / "real"
    (real / "b").mkdir(parents=True)
    os.symlink(real, tmp_path / "link")
    assert file_target(f"{real}/") == file_target(f"file://{real}") == str(real)
    assert file_target(str(tmp_path / "link")) == str(tmp_path / "link")     # as every earlier checkpoint keys it
    assert overlaps(str(tmp_path / "link"), str(real / "b"))                  # but emptying it reaches b
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
