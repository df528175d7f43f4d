"""JDBC URLs, understood in Python: which database, where, and a DB-API connection to it.

Spark reads and writes through the JDBC driver named by the URL (the jars are on the JVM's
class path, see runtime/session.py); SeaTide's own code
(exactly-once commit records, checkpointed split reads, change data capture, table
creation) talks to the same database from Python with the native client of its dialect:
psycopg for PostgreSQL, PyMySQL for MySQL and MariaDB. ``JdbcUrl`` is the one place that
turns SeaTunnel's ``url`` / ``base-url`` option into both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote

POSTGRESQL = "postgresql"
MYSQL = "mysql"          # MySQL and MariaDB speak the same protocol and SQL for what SeaTide does

_SCHEMES = {"postgresql": POSTGRESQL, "mysql": MYSQL, "mariadb": MYSQL}
DEFAULT_PORTS = {POSTGRESQL: 5432, MYSQL: 3306}
DEFAULT_DRIVERS = {POSTGRESQL: "org.postgresql.Driver", MYSQL: "org.mariadb.jdbc.Driver"}
# SeaTunnel job files name MySQL's Connector/J, which SeaTide does not ship; MariaDB's
# Connector/J speaks to MySQL and MariaDB alike, so it stands in for these classes.
MYSQL_CONNECTOR_J = frozenset({"com.mysql.cj.jdbc.Driver", "com.mysql.jdbc.Driver"})

_URL = re.compile(r"^jdbc:(?P<scheme>[a-zA-Z0-9]+)://(?P<hosts>[^/?]*)(?:/(?P<database>[^?]*))?(?:\?(?P<query>.*))?$")


class JdbcUrlError(ValueError):
    """A URL SeaTide cannot use; the message says what a usable one looks like."""


@dataclass(frozen=True)
class JdbcUrl:
    text: str                      # the URL as written (what Spark's JDBC reader and writer get)
    dialect: str                   # POSTGRESQL or MYSQL
    host: str
    port: int
    database: str | None
    params: dict = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> "JdbcUrl":
        match = _URL.match(text.strip())
        if not match or match.group("scheme").lower() not in _SCHEMES:
            raise JdbcUrlError(
                f"'{text}' is not a JDBC URL SeaTide can use: expected jdbc:postgresql://host:5432/db, "
                "jdbc:mysql://host:3306/db or jdbc:mariadb://host:3306/db")
        dialect = _SCHEMES[match.group("scheme").lower()]
        first_host = match.group("hosts").split(",")[0] or "localhost"
        host, _, port = first_host.rpartition(":") if ":" in first_host else (first_host, "", "")
        try:
            port_number = int(port) if port else DEFAULT_PORTS[dialect]
        except ValueError:
            raise JdbcUrlError(f"'{text}': the port '{port}' is not a number") from None
        database = unquote(match.group("database")) if match.group("database") else None
        params = dict(parse_qsl(match.group("query") or "", keep_blank_values=True))
        return cls(text.strip(), dialect, host.strip("[]"), port_number, database or None, params)

    @property
    def default_driver(self) -> str:
        return DEFAULT_DRIVERS[self.dialect]

    def driver_class(self, named: str | None) -> str:
        """The JDBC driver class to load for the ``driver`` option (the dialect's when unset)."""
        if not named or (self.dialect == MYSQL and named in MYSQL_CONNECTOR_J):
            return self.default_driver
        return named

    def for_spark(self, database: str | None = None) -> str:
        """The URL to give Spark's JDBC reader and writer (pointing at ``database`` if given).

        Spark picks its MySQL dialect (backtick quoting) only for URLs starting ``jdbc:mysql``;
        MariaDB Connector/J 2.x accepts that scheme as its own, so ``jdbc:mariadb://`` is
        handed over as ``jdbc:mysql://``.
        """
        text = self.text
        if self.dialect == MYSQL:
            text = re.sub(r"^jdbc:mariadb:", "jdbc:mysql:", text, flags=re.IGNORECASE)
        if database and database != self.database:
            text = re.sub(r"^(jdbc:[a-zA-Z0-9]+://[^/?]*)(/[^?]*)?", lambda m: f"{m.group(1)}/{database}", text)
        return text

    def raw_param(self, name: str) -> str | None:
        """A query parameter's value as written: Connector/J takes ``sessionVariables`` so, not
        URL-decoded (a ``+`` in ``time_zone='+05:00'`` stays a plus)."""
        query = self.text.partition("?")[2]
        found = [value for key, _, value in (item.partition("=") for item in query.split("&")) if key == name]
        return found[-1] if found else None

    def without_param(self, text: str, name: str) -> str:
        """``text`` (this URL, as ``for_spark`` gave it) without the query parameter ``name``."""
        base, _, query = text.partition("?")
        kept = [item for item in query.split("&") if item and item.partition("=")[0] != name]
        return base + ("?" + "&".join(kept) if kept else "")

    def connect(self, user: str | None = None, password: str | None = None, *, autocommit: bool = False,
                database: str | None = None, **extra):
        """A DB-API connection with the dialect's native Python client."""
        database = database or self.database
        if self.dialect == POSTGRESQL:
            import psycopg

            kwargs = {"host": self.host, "port": self.port, "dbname": database or "postgres",
                      "user": user or self.params.get("user") or "postgres", "autocommit": autocommit}
            secret = password if password is not None else self.params.get("password")
            if secret:
                kwargs["password"] = secret
            return psycopg.connect(**kwargs, **extra)
        from seatide.connectors import mysql_client

        return mysql_client.connect(host=self.host, port=self.port, user=user or self.params.get("user") or "root",
                                    password=password if password is not None else self.params.get("password", ""),
                                    database=database, autocommit=autocommit, **extra)


__all__ = ["DEFAULT_DRIVERS", "MYSQL_CONNECTOR_J", "JdbcUrl", "JdbcUrlError", "MYSQL", "POSTGRESQL"]
