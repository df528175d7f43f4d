"""SeaTunnel's SQL on Spark: the dialect, its function library, query-tree rules and Python UDFs.

Used by the Sql transform (``seatide.transforms.sql``) only. It lives outside the plugin
packages on purpose: the plugin registry imports every module of ``seatide.transforms``
at start-up, and this package imports sqlglot, which a job without a Sql transform must
not pay for.
"""
