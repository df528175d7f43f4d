"""PostgreSQL type helpers checked against the server itself: the EWKT that Postgres-CDC renders
from hex EWKB is what PostGIS prints (every geometry kind, Z and M, empties, curves, random
doubles), that EWKT reads back to the very same geometry, and money text parses to the number
PostgreSQL has. No mocks: each expectation is the server's own answer."""

from __future__ import annotations

import secrets

import psycopg
import pytest

from seatide.connectors.pg_types import EWKT_DIGITS, ewkt_from_hex_ewkb, money_text_to_plain
from tests.every_type import pg_extras

GEOMETRIES = [
    "SRID=4326;POINT(1 2)", "POINT EMPTY", "SRID=4326;POINTM(1 2 3)", "POINT(1 2 3)", "POINT(1 2 3 4)",
    "POINT(-0 0)", "LINESTRING(0 0,1.5 1)", "LINESTRING EMPTY",
    "POLYGON((0 0,0 1,1 1,0 0),(0.1 0.1,0.2 0.2,0.2 0.1,0.1 0.1))", "SRID=4326;POLYGON EMPTY",
    "MULTIPOINT(0 0,1 1)", "MULTIPOINT(EMPTY,1 1)", "MULTIPOINTM(0 0 1,1 1 2)",
    "MULTILINESTRING((0 0,1 1),(2 2,3 3))", "MULTILINESTRING(EMPTY,(0 0,1 1))",
    "MULTIPOLYGON(((0 0,0 1,1 1,0 0)),((5 5,5 6,6 6,5 5)))", "SRID=3857;MULTIPOLYGONM(((0 0 1,0 1 1,1 1 1,0 0 1)))",
    "GEOMETRYCOLLECTION(POINT(1 1),LINESTRING(0 0,1 1))", "GEOMETRYCOLLECTIONM(POINTM(1 1 1),LINESTRINGM(0 0 1,1 1 1))",
    "GEOMETRYCOLLECTION EMPTY", "GEOMETRYCOLLECTION(POINT EMPTY,MULTIPOINT(1 1))",
    "GEOMETRYCOLLECTION(GEOMETRYCOLLECTION(POINT(1 1)))",
    "CIRCULARSTRING(0 0,1 1,1 0)", "COMPOUNDCURVE((0 0,1 1),CIRCULARSTRING(1 1,2 0,3 1))",
    "CURVEPOLYGON(CIRCULARSTRING(0 0,4 0,4 4,0 4,0 0),(1 1,3 3,3 1,1 1))",
    "CURVEPOLYGON(COMPOUNDCURVE(CIRCULARSTRING(0 0,2 0,2 1,2 3,4 3),(4 3,4 5,1 4,0 0)))",
    "MULTICURVE((0 0,5 5),CIRCULARSTRING(4 0,4 4,8 4))", "MULTICURVEM((0 0 1,5 5 1),CIRCULARSTRINGM(4 0 1,4 4 1,8 4 1))",
    "MULTISURFACE(CURVEPOLYGON(CIRCULARSTRING(0 0,4 0,4 4,0 4,0 0),(1 1,3 3,3 1,1 1)),((10 10,14 12,11 10,10 10)))",
    "POLYHEDRALSURFACE(((0 0 0,0 0 1,0 1 1,0 0 0)),((0 0 0,0 1 0,1 1 0,0 0 0)))", "TRIANGLE((0 0,0 9,9 0,0 0))",
    "TIN(((0 0 0,0 0 1,0 1 0,0 0 0)),((0 0 0,0 1 0,1 1 0,0 0 0)))",
]
# Points whose coordinates span every magnitude a double has, both notations PostGIS prints
RANDOM_POINTS = """SELECT ST_SetSRID(ST_MakePoint((random() - 0.5) * 10 ^ (random() * 40 - 20),
                                                  (random() - 0.5) * 10 ^ (random() * 600 - 300),
                                                  random() * 1e-9), 4326) AS g
                   FROM generate_series(1, 5000)"""


@pytest.fixture(scope="module")
def conn():
    with psycopg.connect(host="127.0.0.1", dbname="test", user="postgres", autocommit=True) as connection:
        pg_extras(connection)
        yield connection


@pytest.mark.parametrize("kind", ["geometry", "geography"])
def test_ewkt_from_the_text_postgis_sends_is_what_st_asewkt_prints(conn, kind):
    shapes = GEOMETRIES if kind == "geometry" else ["SRID=4326;POINT(-122.3452 47.5925)", "SRID=4326;POINT EMPTY",
                                                    "SRID=4326;LINESTRING(0 0,1.5 1)", "POLYGON((0 0,0 1,1 1,0 0))"]
    wrong = {}
    for shape in shapes:
        sent, printed = conn.execute(f"SELECT %s::{kind}::text, ST_AsEWKT(%s::{kind}, {EWKT_DIGITS})",
                                     (shape, shape)).fetchone()
        if ewkt_from_hex_ewkb(sent) != printed:
            wrong[shape] = (printed, ewkt_from_hex_ewkb(sent))
    assert wrong == {}


def test_ewkt_of_any_double_is_postgis_own_and_reads_back_to_the_same_geometry(conn):
    rows = conn.execute(f"SELECT g::text, ST_AsEWKT(g, {EWKT_DIGITS}), "
                        f"ST_AsEWKB(ST_GeomFromEWKT(ST_AsEWKT(g, {EWKT_DIGITS}))) = ST_AsEWKB(g) "
                        f"FROM ({RANDOM_POINTS}) p").fetchall()
    assert [printed for sent, printed, _ in rows if ewkt_from_hex_ewkb(sent) != printed] == []
    assert all(same for _, _, same in rows), "EWKT with EWKT_DIGITS decimals loses digits"


def test_money_text_reads_as_the_number_postgresql_holds(conn):
    values = ["1234.56", "-1234.56", "0", "0.07", "-92233720368547758.08", "92233720368547758.07"]
    for value in values:
        text, number = conn.execute("SELECT %s::numeric::money::text, %s::numeric::money::numeric::text",
                                    (value, value)).fetchone()
        assert money_text_to_plain(text) == number, (text, number)


def test_postgis_outside_the_search_path_is_read_with_its_own_functions(spark):
    from seatide.config.loader import load_job_text
    from seatide.plugin.base import ReadContext

    database = f"postgis_schema_{secrets.token_hex(3)}"
    with psycopg.connect(host="127.0.0.1", dbname="test", user="postgres", autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {database}")
    try:
        with psycopg.connect(host="127.0.0.1", dbname=database, user="postgres", autocommit=True) as db:
            db.execute("CREATE SCHEMA gis")
            db.execute("CREATE EXTENSION postgis SCHEMA gis")
            db.execute("CREATE TABLE shapes (id int PRIMARY KEY, g gis.geometry)")
            db.execute("INSERT INTO shapes VALUES (1, gis.ST_GeomFromText('POINT(1 2)', 4326))")
        job = load_job_text(f'source {{ Jdbc {{ url = "jdbc:postgresql://127.0.0.1:5432/{database}", '
                            'user = "postgres", table_path = "public.shapes" } }\nsink { Console {} }')
        rows = job.sources[0].plugin.read(ReadContext(spark, micro_batch=False, unbounded=False, parallelism=1,
                                                      max_rows_per_batch=10, read_interval_ms=1000,
                                                      plugin_id="s")).collect()
        assert [(r.id, r.g) for r in rows] == [(1, "SRID=4326;POINT(1 2)")]
    finally:
        with psycopg.connect(host="127.0.0.1", dbname="test", user="postgres", autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {database} WITH (FORCE)")


@pytest.mark.parametrize("text", ["1.234,56 €", "1 234,56 kr", "€1.234,56", "Fr. 1'234.56", "12,34", "$"])
def test_money_text_not_in_the_c_locales_form_is_refused_not_misread(text):
    """Under an lc_monetary writing the fraction after a comma, keeping digits and points read
    1.234,56 as 1.23456; the reader sets lc_monetary = C on its sessions, and text of any
    other form is refused, naming it."""
    with pytest.raises(ValueError, match="lc_monetary"):
        money_text_to_plain(text)
