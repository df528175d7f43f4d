"""The Jdbc source's options: SeaTunnel's names and defaults (Jdbc.md, PostgreSQL.md, Mysql.md)."""

from __future__ import annotations

from seatide.plugin.options import ANY, BOOL, FLOAT, INT, LIST, OBJECT, REQUIRED, STRING, Option

# Options SeaTunnel has for its own split strategies (sampling, Oracle statistics) or for
# databases SeaTide does not reach. They are accepted so SeaTunnel jobs load unchanged,
# and have no effect; docs/connectors/jdbc-source.md says why for each.
ACCEPTED_WITHOUT_EFFECT = ("compatible_mode", "decimal_type_narrowing", "use_select_count",
                           "skip_analyze", "split.even-distribution.factor.lower-bound",
                           "split.even-distribution.factor.upper-bound",
                           "split.sample-sharding.threshold", "split.inverse-sampling.rate",
                           "connection_check_timeout_sec")

JDBC_SOURCE_OPTIONS: tuple[Option, ...] = (
    Option("url", STRING, REQUIRED,
           "JDBC URL: jdbc:postgresql://host:5432/db, jdbc:mysql://host:3306/db or jdbc:mariadb://host:3306/db"),
    Option("driver", STRING, None,
           "JDBC driver class; defaults to the dialect's (org.postgresql.Driver, org.mariadb.jdbc.Driver). "
           "MySQL Connector/J class names are served by MariaDB Connector/J"),
    Option("user", STRING, None, "database user"),
    Option("password", STRING, None, "database password"),
    Option("query", STRING, None, "the SELECT to read; give this or table_path"),
    Option("table_path", STRING, None,
           "the table to read instead of a query: db.table (MySQL), db.schema.table or schema.table (PostgreSQL)"),
    Option("table_list", LIST, None,
           "several tables in one source: [{ table_path = \"db.t1\" }, { table_path = \"db.t2\", query = \"...\" }]; "
           "each entry takes the block's options with its own (query, partition_column, split.size...) on top"),
    Option("where_condition", STRING, None, "row filter applied to the query or table, starting with `where`"),
    Option("partition_column", STRING, None,
           "numeric, date or character column to split the read by; default: the first such column "
           "of table_path's primary key, else no split (one reader)"),
    Option("partition_lower_bound", ANY, None,
           "smallest partition_column value read (default: the column's minimum); rows below are not read"),
    Option("partition_upper_bound", ANY, None,
           "largest partition_column value read (default: the column's maximum); rows above are not read"),
    Option("partition_num", INT, None,
           "number of splits; by default the split count follows split.size"),
    Option("split.size", INT, 8096, "rows in one split (the split count is rows / split.size)"),
    Option("split.string_split_mode", STRING, "sample",
           "how a character partition_column is cut: sample (the values that begin equal parts of the rows "
           "in order, asked of the database) or charset_based (values evenly between its minimum and "
           "maximum, its characters taken as printable ASCII 32..126)"),
    Option("split.string_split_mode_collate", STRING, None,
           "the collation a character partition_column is compared in when cut (default: the column's own)"),
    Option("fetch_size", INT, 0, "rows fetched per round trip; 0 uses the driver's default"),
    Option("properties", OBJECT, None, "extra JDBC connection properties (Spark's reader only)"),
    Option("connection_check_timeout_sec", INT, 30, "accepted; SeaTide checks connections when it plans the read"),
    Option("compatible_mode", STRING, None, "accepted; only OceanBase/StarRocks use it in SeaTunnel"),
    Option("decimal_type_narrowing", BOOL, True, "accepted; Oracle only in SeaTunnel"),
    Option("use_select_count", BOOL, False, "accepted; Oracle only in SeaTunnel"),
    Option("skip_analyze", BOOL, False, "accepted; Oracle only in SeaTunnel"),
    Option("split.even-distribution.factor.lower-bound", FLOAT, 0.05,
           "accepted; SeaTide always splits the value range evenly"),
    Option("split.even-distribution.factor.upper-bound", FLOAT, 100.0,
           "accepted; SeaTide always splits the value range evenly"),
    Option("split.sample-sharding.threshold", INT, 1000, "accepted; SeaTide does not sample"),
    Option("split.inverse-sampling.rate", INT, 1000, "accepted; SeaTide does not sample"),
)

__all__ = ["ACCEPTED_WITHOUT_EFFECT", "JDBC_SOURCE_OPTIONS"]
