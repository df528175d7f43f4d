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

The driver measures with it (``JdbcSource.plan``), and so do the checkpointed readers'
Python processes when a stream starts without a plan; ``spec`` is the JSON-able description
``JdbcSource.split_spec`` gives both.
"""

from __future__ import annotations

from seatide.connectors.jdbc.splits import STRING, SplitPlan, charset_cuts, plan_splits, split_count, \
    string_literal, string_plan

SAMPLE, CHARSET_BASED = "sample", "charset_based"
STRING_SPLIT_MODES = (SAMPLE, CHARSET_BASED)


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


__all__ = ["CHARSET_BASED", "SAMPLE", "STRING_SPLIT_MODES", "measure", "string_split_sql"]
