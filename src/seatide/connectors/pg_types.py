"""PostgreSQL column types: how SeaTide carries each, for the Jdbc source and Postgres-CDC.

Only built-in types have fixed OIDs; enums, domains, ranges and extension types (PostGIS)
get theirs when they are created. So a type is judged by what ``pg_type`` says of it —
its name, its category and its kind (``lookup``) — never by number, and a refusal names it.

A type is carried in one of four ways (``carriage``):

* ``NATIVE``: the types of SeaTunnel's PostgreSQL pages (bool, bytea, int2/4/8, float4/8,
  numeric, char/varchar/text, date, time(tz), timestamp(tz)); each connector maps them
  with its own table, as its page says;
* ``MONEY``: ``decimal(30,2)``, as SeaTunnel reads money;
* ``EWKT``: PostGIS ``geometry`` and ``geography``, as a string in extended WKT
  (``SRID=4326;POINT(1 2)``), which keeps the SRID and every digit, so PostGIS reads the
  very same geometry back from it;
* ``TEXT``: any other type that has a text form PostgreSQL reads back into the same value
  (json, jsonb, xml, uuid, network addresses, geometric types, bit strings, interval,
  tsvector, enums, ranges, composite types, ...): a string, the type's own text output.
  That is what SeaTunnel does for the ones its converter knows, and a value written into a
  column of the type is equal to the one read.

Pseudo-types (``record`` of ``SELECT row(a, b)``, ``void``, ...) name no column type a
value could go back into: they are refused (``None``), by name, with the way out.

Arrays of NATIVE elements that Spark has an element type for stay arrays
(``ARRAY_ELEMENTS``); arrays of anything else carried travel whole as their text
(``{a,b}``), which PostgreSQL reads back into the array type.
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass
from decimal import Decimal

NATIVE, MONEY, EWKT, TEXT = "native", "money", "ewkt", "text"

NATIVE_TYPES = frozenset({"bool", "bytea", "int2", "int4", "int8", "float4", "float8", "numeric",
                          "bpchar", "varchar", "text", "name", "date", "time", "timetz",
                          "timestamp", "timestamptz"})
# elements whose arrays keep their structure (Spark's JDBC reader and psycopg agree on them)
ARRAY_ELEMENTS = frozenset({"bool", "bytea", "int2", "int4", "int8", "float4", "float8", "numeric",
                            "bpchar", "varchar", "text", "date", "timestamp"})
POSTGIS_TYPES = frozenset({"geometry", "geography"})
MONEY_PRECISION, MONEY_SCALE = 30, 2
# Decimal places PostGIS needs to print any double exactly in fixed notation (17 significant
# digits after at most 8 leading zeros: its OUT_MAX_DIGITS); with fewer it rounds.
EWKT_DIGITS = 25


@dataclass(frozen=True)
class PgType:
    """One type as ``pg_type`` describes it."""

    oid: int
    name: str                    # typname: int4, _int4, geometry, my_enum
    display: str                 # format_type(): integer, character varying(10), geometry(Point,4326)
    category: str                # typcategory: A array, P pseudo, U user-defined, ...
    kind: str                    # typtype: b base, c composite, d domain, e enum, p pseudo, r range
    element: "PgType | None" = None    # an array's element type
    builtin: bool = True         # a type every PostgreSQL database has (not an enum, domain, extension)
    schema: str = "pg_catalog"   # where the type lives (an extension's functions live there too)

    @property
    def is_array(self) -> bool:
        return self.category == "A" and self.element is not None and self.name.startswith("_")


def carriage(t: PgType) -> str | None:
    """How values of ``t`` travel (see the module doc); None when they cannot."""
    if t.is_array:
        inner = carriage(t.element)
        if inner is None:
            return None
        return NATIVE if inner == NATIVE and t.element.name in ARRAY_ELEMENTS else TEXT
    if t.kind == "p" or t.category == "P":
        return None
    if t.name in NATIVE_TYPES:
        return NATIVE
    if t.name == "money":
        return MONEY
    if t.name in POSTGIS_TYPES:
        return EWKT
    return TEXT


def refusal(column: str, t: PgType, way_out: str | None = None) -> str:
    """The message for a column of a type that cannot be carried."""
    return (f"column '{column}' has PostgreSQL type {t.display}, which has no SeaTunnel type "
            f"(a pseudo-type names no column type its values could be written back into); "
            + (way_out or f"cast it in `query` to one that has, e.g. CAST({column} AS text), or select "
                          "the fields of a row one by one"))


_LOOKUP = """
SELECT t.oid, t.typname, format_type(t.oid, NULL), t.typcategory, t.typtype, t.oid < 16384, tn.nspname,
       e.oid, e.typname, format_type(e.oid, NULL), e.typcategory, e.typtype, e.oid < 16384, en.nspname
FROM pg_type t JOIN pg_namespace tn ON tn.oid = t.typnamespace
LEFT JOIN pg_type e ON e.oid = t.typelem AND t.typcategory = 'A'
LEFT JOIN pg_namespace en ON en.oid = e.typnamespace
WHERE t.oid = ANY(%s)"""


def lookup(conn, oids) -> dict[int, PgType]:
    """``pg_type``'s description of each OID (one query)."""
    found = {}
    for row in conn.execute(_LOOKUP, (sorted(set(oids)),)).fetchall():
        element = PgType(*row[7:12], None, row[12], row[13]) if row[7] else None
        found[row[0]] = PgType(*row[0:5], element, row[5], row[6])
    return found


def ewkt_sql(t: PgType) -> str:
    """SQL printing a PostGIS column (``{c}``) as EWKT with every digit, with the function of
    the schema PostGIS was installed in (which need not be on the search path)."""
    schema = '"' + t.schema.replace('"', '""') + '"'
    return f"{schema}.ST_AsEWKT({{c}}, {EWKT_DIGITS})"


def column_displays(conn, oids: list[int], modifiers: list[int]) -> list[str]:
    """Each column's type with its modifiers, as PostgreSQL writes it: ``numeric(10,3)``, ``bit(3)``."""
    rows = conn.execute("SELECT format_type(o, m) FROM unnest(%s::oid[], %s::int[]) WITH ORDINALITY AS c(o, m, n) "
                        "ORDER BY n", (oids, modifiers)).fetchall()
    return [row[0] for row in rows]


def is_portable(t: PgType) -> bool:
    """True when another database can be expected to know the type by its name: built-in
    types and PostGIS's (an extension the target must have too, as SeaTunnel expects)."""
    base = t.element if t.is_array else t
    return base is not None and (base.builtin or base.name in POSTGIS_TYPES)


# -- money ---------------------------------------------------------------------------------------
def money_text_to_plain(text: str) -> str:
    """PostgreSQL's money output under ``lc_monetary = C`` (``$1,234.56``, ``-$1,234.56``) as a
    plain number; ValueError for text of any other form.

    The output follows the session's ``lc_monetary``, which the readers set to C: a locale that
    writes the fraction after a comma (``1.234,56 €``) would otherwise be misread by a lenient
    parse (as 1.23456), so anything but the C form is refused rather than guessed at."""
    found = _MONEY.fullmatch(text.strip())
    if found is None:
        raise ValueError(f"money text {text!r} is not in the form lc_monetary = C prints ($1,234.56): "
                         "the session reading it must have lc_monetary = C")
    sign, number = found.group(1) or found.group(3) or "", found.group(2)
    return ("-" if sign else "") + number.replace(",", "")


_MONEY = re.compile(r"(\(|-)?\$(\d{1,3}(?:,\d{3})*(?:\.\d+)?)(\))?")


# -- PostGIS: hex EWKB -> EWKT ------------------------------------------------------------------------
# What PostgreSQL prints for a geometry or geography column (its text output) is hex EWKB;
# the Jdbc source has the server print EWKT instead (ST_AsEWKT), which change data capture
# cannot ask for, so it renders the same text here, digit for digit as PostGIS does.
_NAMES = {1: "POINT", 2: "LINESTRING", 3: "POLYGON", 4: "MULTIPOINT", 5: "MULTILINESTRING",
          6: "MULTIPOLYGON", 7: "GEOMETRYCOLLECTION", 8: "CIRCULARSTRING", 9: "COMPOUNDCURVE",
          10: "CURVEPOLYGON", 11: "MULTICURVE", 12: "MULTISURFACE", 13: "CURVE", 14: "SURFACE",
          15: "POLYHEDRALSURFACE", 16: "TIN", 17: "TRIANGLE"}
_Z, _M, _SRID = 0x80000000, 0x40000000, 0x20000000
# inside these collections a member of this type is written without its name
_UNNAMED_MEMBERS = {4: {1}, 5: {2}, 6: {3}, 9: {2}, 10: {2}, 11: {2}, 12: {3}, 15: {3}, 16: {17}}


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, fmt: str):
        values = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return values


def ewkt_from_hex_ewkb(text: str) -> str:
    """PostGIS's text output of a geometry/geography (hex EWKB) as ST_AsEWKT(g, 25) prints it."""
    reader = _Reader(bytes.fromhex(text))
    srid, body = _geometry(reader, top=True)
    return (f"SRID={srid};" if srid else "") + body


def _geometry(reader: _Reader, top: bool = False, parent: int | None = None) -> tuple[int, str]:
    (order,) = reader.take("B")
    endian = "<" if order == 1 else ">"
    (code,) = reader.take(endian + "I")
    srid = reader.take(endian + "I")[0] if code & _SRID else 0
    has_z, has_m = bool(code & _Z), bool(code & _M)
    kind = code & 0x0FFFFFFF
    if kind >= 1000:              # ISO codes: 1001 point Z, 2001 point M, 3001 point ZM
        has_z, has_m = has_z or kind // 1000 in (1, 3), has_m or kind // 1000 in (2, 3)
        kind %= 1000
    dims = 2 + has_z + has_m
    name = _NAMES.get(kind)
    if name is None:
        raise ValueError(f"geometry type {kind} is not one PostGIS writes")
    named = parent is None or kind not in _UNNAMED_MEMBERS.get(parent, ())
    label = (name + ("M" if has_m and not has_z else "")) if named else ""

    def coords(count: int) -> str:
        values = reader.take(f"{endian}{count * dims}d")
        return ",".join(" ".join(_number(v) for v in values[i:i + dims])
                        for i in range(0, len(values), dims))

    if kind == 1:
        values = reader.take(f"{endian}{dims}d")
        if all(math.isnan(v) for v in values):
            body = "EMPTY"
        else:
            body = "(" + " ".join(_number(v) for v in values) + ")"
        if parent == 4:             # a multipoint's member: no name, no parentheses of its own
            return srid, body if body == "EMPTY" else body[1:-1]
    elif kind in (2, 8):
        (count,) = reader.take(endian + "I")
        body = f"({coords(count)})" if count else "EMPTY"
    elif kind in (3, 17):
        (rings,) = reader.take(endian + "I")
        parts = []
        for _ in range(rings):
            (count,) = reader.take(endian + "I")
            parts.append(f"({coords(count)})")
        body = f"({','.join(parts)})" if parts else "EMPTY"
    else:
        (members,) = reader.take(endian + "I")
        parts = [_geometry(reader, parent=kind)[1] for _ in range(members)]
        body = f"({','.join(parts)})" if parts else "EMPTY"
    if not label:
        return srid, body
    return srid, f"{label} {body}" if body == "EMPTY" else label + body


def _number(value: float) -> str:
    """A double as PostGIS prints it: the shortest digits that read back to it (Python's repr
    finds the same), in fixed notation between 1e-8 and 1e15 (exclusive), else as 1.5e+20."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "-Infinity" if value < 0 else "Infinity"
    if value == 0:
        return "0"
    shortest = Decimal(repr(value)).normalize()
    if 1e-8 < abs(value) < 1e15:
        return format(shortest, "f")
    sign, digits, _ = shortest.as_tuple()
    text = "".join(map(str, digits))
    power = shortest.adjusted()
    return (("-" if sign else "") + text[0] + ("." + text[1:] if len(text) > 1 else "")
            + ("e-" if power < 0 else "e+") + str(abs(power)))


__all__ = ["ARRAY_ELEMENTS", "EWKT", "EWKT_DIGITS", "MONEY", "MONEY_PRECISION", "MONEY_SCALE", "NATIVE",
           "PgType", "TEXT", "carriage", "column_displays", "ewkt_sql", "ewkt_from_hex_ewkb", "is_portable", "lookup", "money_text_to_plain",
           "refusal"]
