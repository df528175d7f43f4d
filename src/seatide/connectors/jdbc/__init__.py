"""Jdbc source and sink (PostgreSQL, MySQL, MariaDB): SeaTunnel's Jdbc connector on Spark."""
