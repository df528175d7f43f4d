"""Measuring a Jdbc source's query for its split plan, in the database.

Every plan starts from one query of the partition column's minimum, maximum and row count
(``plan_sql``). A string column then needs the values its splits begin at, asked of the
database so that they are in the order its comparisons use (the column's collation), as
SeaTunnel's ``split.string_split_mode`` chooses them:

* ``sample``: the values that begin each of ``count`` equal parts of the column's rows in
  order (``NTILE``), so the splits hold about equal rows whatever the values look like;
* ``charset_based``: values evenly between the minimum and the maximum, read as numbers
  whose digits are the printable ASCII characters (no pass over the rows), then ordered and
  made distinct by the database in the column's collation.

A whole table split by the first column of its primary key (a number or a date) is not
counted: the number of rows only sizes its splits and batches (the minimum and maximum, read
from the key's index, bound them), so the database's statistics give it (``estimate_spec``),
checked against the key's density first. The statistics can be stale, and a key can be sparse
or skewed, so the rows of ``PROBES`` narrow windows spread over the key's range are counted
through the index; when they hold a different number of rows than the statistics and the
key's range predict (by more than ``DENSITY_SLACK`` either way), the table is counted after
all. A plan sized too small would make giant splits and batches far over their row limit; one
sized too large, many small batches. Either way every row is still read once: the rows only
size the plan, and the plan, once measured, travels in the offsets Spark logs, so a resumed
stream uses it and never measures again.

The driver measures with it (``JdbcSource.plan``), and so do the checkpointed readers'
Python processes when a stream starts without a plan; ``spec`` is the JSON-able description
``JdbcSource.split_spec`` gives both.
"""

from __future__ import annotations

from seatide.connectors.jdbc.splits import DATE, STRING, SplitPlan, as_bound, charset_cuts, day_to_date, \
    plan_splits, split_count, string_literal, string_plan

SAMPLE, CHARSET_BASED = "sample", "charset_based"
STRING_SPLIT_MODES = (SAMPLE, CHARSET_BASED)

PROBES = 8             # windows of the key whose rows are counted to check the statistics
PROBE_ROWS = 1024      # rows each window holds when the statistics are right
DENSITY_SLACK = 2.0    # how far the counted rows may be from those predicted, either way
# Probing costs an index range scan of PROBES * PROBE_ROWS rows at least (a dense key, e.g. a
# date with thousands of rows a day, more): above this part of the table, count it all instead.
PROBED_PART = 0.25


def estimate_spec(dialect: str, table: str, schema: str | None, name: str, quoted_column: str,
                  bounded_sql: str) -> dict:
    """How ``measure`` sizes a whole table from its statistics: the query of its estimated
    rows (PostgreSQL: ``reltuples`` scaled to the table's pages now, as its planner does;
    MySQL/MariaDB: ``TABLE_ROWS``), and what the density check and the exact count need.
    ``table``: the table as SQL names it; ``schema``, ``name``: its parts (MySQL)."""
    from seatide.connectors.jdbc.url import POSTGRESQL

    if dialect == POSTGRESQL:
        # reltuples < 0: never analyzed; relpages 0: empty when analyzed, or not a plain table;
        # a tenth of the rows changed since: stale in a way the probes can miss (rows added
        # between their windows at another density than the analyzed ones: outside review)
        rows = ("SELECT CASE WHEN c.reltuples < 0 OR c.relpages = 0 "
                "OR COALESCE(s.n_mod_since_analyze, 0) > c.reltuples / 10 THEN NULL ELSE c.reltuples / c.relpages * "
                "(pg_relation_size(c.oid) / current_setting('block_size')::int) END FROM pg_class c "
                "LEFT JOIN pg_stat_all_tables s ON s.relid = c.oid "
                f"WHERE c.oid = to_regclass({string_literal(dialect, table)})")
    else:
        where_schema = string_literal(dialect, schema) if schema else "DATABASE()"
        rows = (f"SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = {where_schema} "
                f"AND TABLE_NAME = {string_literal(dialect, name)}")
    return {"rows_sql": rows, "count_sql": f"SELECT COUNT(*) FROM ({bounded_sql}) seatide_t",
            "probe_sql": f"SELECT COUNT(*) FROM ({bounded_sql}) seatide_t WHERE ", "quoted_column": quoted_column}


def string_split_sql(quoted_column: str, bounded_sql: str) -> dict:
    """The two queries a string column's cut points come from, each as the text before and after
    what measuring puts between (the number of tiles; the candidate cut points)."""
    tiles = [f"SELECT DISTINCT seatide_first FROM (SELECT MIN(seatide_v) AS seatide_first FROM "
             f"(SELECT {quoted_column} AS seatide_v, NTILE(",
             f") OVER (ORDER BY {quoted_column}) AS seatide_tile FROM ({bounded_sql}) seatide_t WHERE "
             f"{quoted_column} IS NOT NULL) seatide_s GROUP BY seatide_tile HAVING seatide_tile > 1) seatide_f "
             f"ORDER BY seatide_first"]
    # The candidates take the column's collation from the UNION with the (empty) column
    ordered = [f"SELECT DISTINCT seatide_cut FROM (SELECT {quoted_column} AS seatide_cut FROM ({bounded_sql}) "
               f"seatide_t WHERE 1 = 0 UNION ALL ", ") seatide_u ORDER BY seatide_cut"]
    return {"tiles_sql": tiles, "ordered_sql": ordered}


def measure(conn, spec: dict, tiles: int | None = None) -> SplitPlan:
    """The plan of ``spec``'s query as the database holds it now. ``tiles``: a string column's
    number of splits when the rows are not counted (the parallel read)."""
    cursor = conn.cursor()
    cursor.execute(spec["plan_sql"])
    lower, upper, rows = cursor.fetchone()
    if spec.get("estimate"):          # plan_sql has no count: the statistics size the plan
        rows = _estimated_rows(cursor, spec, lower, upper)
    if spec["kind"] != STRING or spec["column"] is None:
        return plan_splits(spec["column"], spec["kind"], lower, upper, int(rows or 0),
                           split_size=spec["split_size"], partition_num=spec["partition_num"])
    if rows is not None and not int(rows):
        return string_plan(spec["column"], [], 0, spec["dialect"])
    count = tiles or split_count(int(rows or 0), spec["split_size"], spec["partition_num"])
    strings = spec["strings"]
    if count <= 1 or lower is None:
        cuts = []
    elif strings["mode"] == CHARSET_BASED:
        candidates = charset_cuts(str(lower), str(upper), count)
        values = " UNION ALL ".join(f"SELECT {string_literal(spec['dialect'], c)}" for c in candidates)
        cursor.execute(values.join(strings["ordered_sql"]))
        cuts = [row[0] for row in cursor.fetchall()]
    else:
        cursor.execute(str(int(count)).join(strings["tiles_sql"]))
        cuts = [row[0] for row in cursor.fetchall()]
    return string_plan(spec["column"], [str(c) for c in cuts if c is not None], None if rows is None else int(rows),
                       spec["dialect"])


def _estimated_rows(cursor, spec: dict, lower, upper) -> int:
    """The table's rows as its statistics hold them, when the key's density agrees; else counted."""
    estimate = spec["estimate"]

    def counted() -> int:
        cursor.execute(estimate["count_sql"])
        return int(cursor.fetchone()[0])

    if lower is None:                 # no key at all (empty, or every key NULL): only a count tells
        return counted()
    cursor.execute(estimate["rows_sql"])
    found = cursor.fetchone()
    guess = round(float(found[0])) if found and found[0] is not None else 0
    if guess <= 0:                    # never analyzed, or not a table with statistics
        return counted()
    low, high = as_bound(spec["kind"], lower, upper=False), as_bound(spec["kind"], upper, upper=True)
    width = high - low + 1
    window = max(1, -(-width * PROBE_ROWS // guess))
    predicted = guess * window * PROBES / width
    if PROBES * window >= width or predicted > PROBED_PART * guess:
        return counted()
    starts = [low + (width - window) * i // (PROBES - 1) for i in range(PROBES)]
    column = estimate["quoted_column"]
    literal = (lambda v: f"DATE '{day_to_date(v).isoformat()}'") if spec["kind"] == DATE else str
    cursor.execute(estimate["probe_sql"] + " OR ".join(
        f"({column} >= {literal(s)} AND {column} < {literal(s + window)})" for s in starts))
    probed = int(cursor.fetchone()[0])
    if not predicted / DENSITY_SLACK <= probed <= predicted * DENSITY_SLACK:
        return counted()              # stale statistics, or a key bunched where the windows look
    return guess


__all__ = ["CHARSET_BASED", "DENSITY_SLACK", "PROBES", "PROBE_ROWS", "SAMPLE", "STRING_SPLIT_MODES",
           "estimate_spec", "measure", "string_split_sql"]
