"""Iceberg sink and source: tables in a hadoop (directory), JDBC/SQL or REST catalog, through pyiceberg."""
