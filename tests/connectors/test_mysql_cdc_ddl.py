"""MySQL-CDC's reading of ALTER TABLE statements (mysql_cdc/ddl.py) and their application, one at a
time, to a table's kept shape (mysql_cdc/shapes.py), with the server described further on."""

from __future__ import annotations

import pytest

from seatide.connectors.mysql_cdc.catalog import CapturedTable
from seatide.connectors.mysql_cdc.ddl import ADD, DROP, REDEFINE, RENAME, UnknownDdl, altered_table, parse_alter
from seatide.connectors.mysql_cdc.shapes import ShapeError, after_ddl, numbered

ITEMS = (("id", "int", "int(11)", 10, 0), ("name", "varchar", "varchar(20)", None, None),
         ("qty", "int", "int(11)", 10, 0), ("price", "decimal", "decimal(8,2)", 8, 2))


def table(described=ITEMS, charsets=(None, "utf8mb4", None, None)) -> CapturedTable:
    return numbered(CapturedTable("shop", "items", described, ("id",), charsets=charsets), ["bin.000001", 4])


def test_the_forms_mysql_and_mariadb_use_read_in_statement_order():
    alter = parse_alter("ALTER TABLE `items` ADD COLUMN note text AFTER id, ADD (a int, b varchar(5) CHARACTER SET "
                        "latin1), DROP name, RENAME COLUMN qty TO quantity, CHANGE COLUMN price cost DECIMAL(12, 3) "
                        "NOT NULL FIRST, MODIFY a BIGINT UNSIGNED, ADD INDEX i (a), ALGORITHM=INPLACE", "shop")
    assert (alter.database, alter.table) == ("shop", "items")
    assert [(c.kind, c.column, c.new_name, c.place) for c in alter.changes] == [
        (ADD, "note", None, ("after", "id")), (ADD, "a", None, None), (ADD, "b", None, None), (DROP, "name", None, None),
        (RENAME, "qty", "quantity", None), (REDEFINE, "price", "cost", ("first",)), (REDEFINE, "a", None, None)]
    assert [c.definition.type_text for c in alter.changes if c.definition] == [
        "text", "int", "varchar(5)", "decimal(12,3)", "bigint unsigned"]
    assert parse_alter("ALTER TABLE items ADD KEY k (a), DROP PRIMARY KEY, ALTER COLUMN a SET DEFAULT 1, "
                       "ENGINE = InnoDB").changes == ()
    assert altered_table("alter online table shop2.items add c int", "shop") == ("shop2", "items")
    assert altered_table("UPDATE items SET a = 1", "shop") is None


@pytest.mark.parametrize("statement", ["ALTER TABLE items CONVERT TO CHARACTER SET latin1",
                                       "ALTER TABLE items RENAME TO things", "ALTER TABLE items ADD (x int, KEY (x))",
                                       "ALTER TABLE items FROBNICATE qty"])
def test_a_statement_whose_effect_on_the_columns_is_not_known_is_refused_not_guessed(statement):
    with pytest.raises(UnknownDdl):
        parse_alter(statement, "shop")


def test_each_statement_applies_to_the_kept_shape_whatever_the_server_says_now():
    # the server is three changes further: note added, qty renamed to quantity, name dropped
    server = CapturedTable("shop", "items", (ITEMS[0], ("quantity", "int", "int(11)", 10, 0), ITEMS[3],
                                             ("note", "text", "text", None, None)), ("id",),
                           charsets=(None, None, None, "utf8mb4"))
    kept = after_ddl(table(), "ALTER TABLE items ADD COLUMN note text", "shop", ("bin.000001", 100), server)
    assert [r[0] for r in kept.live] == ["id", "name", "qty", "price", "note"] and kept.ids[:5] == (1, 2, 3, 4, 5)
    assert kept.charsets[4] == "utf8mb4" and kept.ddl_at == ("bin.000001", 100)
    kept = after_ddl(kept, "ALTER TABLE items RENAME COLUMN qty TO quantity", "shop", ("bin.000001", 200), server)
    assert [r[0] for r in kept.live] == ["id", "name", "quantity", "price", "note"] and kept.retired == ("qty",)
    assert kept.ids[2] == 3                     # a rename keeps the column's id: the sink renames it
    kept = after_ddl(kept, "ALTER TABLE items DROP COLUMN name", "shop", ("bin.000001", 300), server)
    assert [r[0] for r in kept.live] == ["id", "quantity", "price", "note"]
    # retyped on the server since: the statement's own type is taken, not the server's
    kept = after_ddl(kept, "ALTER TABLE items MODIFY price DECIMAL(10, 4)", "shop", ("bin.000001", 400), server)
    assert kept.live[2] == ("price", "decimal", "decimal(10,4)", 10, 4)


def test_a_statement_that_does_not_fit_the_kept_shape_or_cannot_be_described_is_refused():
    with pytest.raises(ShapeError, match="adds column qty, which the table has already"):
        after_ddl(table(), "ALTER TABLE items ADD qty int", "shop", ("bin.000001", 9), None)
    with pytest.raises(ShapeError, match="renames column nope"):
        after_ddl(table(), "ALTER TABLE items RENAME COLUMN nope TO other", "shop", ("bin.000001", 9), None)
    # a text column the server no longer has: its character set is not known
    with pytest.raises(ShapeError, match="without a character set"):
        after_ddl(table(), "ALTER TABLE items ADD memo varchar(9)", "shop", ("bin.000001", 9), table())


def test_a_column_definition_carries_its_not_null_and_default_to_the_kept_shape():
    """What the target's ADD COLUMN needs to fill the rows the server filled (finding 11 of issue 30)."""
    alter = parse_alter("ALTER TABLE items ADD a VARCHAR(64) CHARACTER SET utf8mb4 NOT NULL DEFAULT 'y''y' COMMENT 'c', "
                        "ADD b INT DEFAULT -7, ADD c DATETIME(3) NOT NULL DEFAULT current_timestamp(3) ON UPDATE "
                        "current_timestamp(3), ADD d CHAR(36) DEFAULT (uuid()) NOT NULL, ADD e BIT DEFAULT b'1', "
                        "ADD f TEXT DEFAULT NULL, ADD g INT PRIMARY KEY, ADD h VARCHAR(3) CHARSET latin1 DEFAULT "
                        "_latin1'a\\\\b' AFTER id", "shop")
    assert [(c.definition.name, c.definition.not_null, c.definition.default) for c in alter.changes] == [
        ("a", True, ("literal", "y'y")), ("b", False, ("literal", "-7")), ("c", True, ("now", 3)),
        ("d", True, ("expression", "( uuid ( ) )")), ("e", False, ("expression", "b'1'")), ("f", False, None),
        ("g", True, None), ("h", False, ("literal", "a\\b"))]
    kept = after_ddl(table(), "ALTER TABLE items ADD note VARCHAR(9) CHARACTER SET utf8mb4 NOT NULL DEFAULT 'n'",
                     "shop", ("bin.000001", 100), None)
    kept = after_ddl(kept, "ALTER TABLE items RENAME COLUMN note TO memo, MODIFY qty BIGINT DEFAULT 0", "shop",
                     ("bin.000001", 200), None)
    defined = dict(zip((r[0] for r in kept.described), kept.definitions))
    assert defined["memo"] == (True, ("literal", "n")) and defined["qty"] == (False, ("literal", "0"))
    assert CapturedTable.from_json(kept.to_json()) == kept
