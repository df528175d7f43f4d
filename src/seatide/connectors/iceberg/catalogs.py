"""SeaTunnel's ``iceberg.catalog.config`` -> a pyiceberg catalog.

* ``type = "hadoop"``: a warehouse directory (``hadoop_catalog.HadoopCatalog``).
* ``type = "jdbc"``: Iceberg's JDBC catalog. Its properties (``uri = "jdbc:postgresql://..."``
  or ``"jdbc:sqlite:/path"``, ``jdbc.user``, ``jdbc.password``, ``warehouse``) are read into
  pyiceberg's SQL catalog, which keeps the same tables (``iceberg_tables``,
  ``iceberg_namespace_properties``), so engines using Iceberg's JdbcCatalog with the same
  ``catalog_name`` see the same tables.
* ``type = "sql"``: pyiceberg's name for the same catalog, ``uri`` an SQLAlchemy URL.
* ``type = "rest"``: pyiceberg's REST catalog, properties passed as they are.

Other types (``hive``, ``glue``, ``nessie``...) are refused at load time, naming these.
"""

from __future__ import annotations

import os
import posixpath
from contextlib import contextmanager
from urllib.parse import quote, unquote, urlsplit

from seatide.connectors.iceberg.warehouse import local_warehouse

SUPPORTED = ("hadoop", "jdbc", "sql", "rest")


class CatalogConfigError(ValueError):
    """``iceberg.catalog.config`` cannot make a catalog; the message names the key."""


def flat_properties(block) -> dict[str, str]:
    """A properties map as Iceberg reads it: HOCON reads ``write.format.default = orc`` (unquoted) as
    nested objects, which become dotted keys again; values as text."""
    from collections.abc import Mapping

    out: dict[str, str] = {}

    def walk(value, prefix: str) -> None:
        for key, inner in value.items():
            path = f"{prefix}{key}"
            if isinstance(inner, Mapping):
                walk(inner, path + ".")
            else:
                out[path] = "true" if inner is True else "false" if inner is False else str(inner)

    walk(block or {}, "")
    return out


def catalog_type(config: dict) -> str:
    kind = str(config.get("type", config.get("catalog-type", ""))).strip().lower()
    if not kind:
        raise CatalogConfigError("iceberg.catalog.config needs a type: one of " + ", ".join(SUPPORTED))
    if kind not in SUPPORTED:
        raise CatalogConfigError(
            f"iceberg.catalog.config: type = \"{kind}\" is not supported by SeaTide; use hadoop (a warehouse "
            "directory), jdbc (Iceberg's JDBC catalog tables in PostgreSQL or SQLite) or rest")
    return kind


def check_config(config: dict) -> None:
    """Raise ``CatalogConfigError`` for a config that cannot work, before anything runs."""
    kind = catalog_type(config)
    if kind == "hadoop":
        if not config.get("warehouse"):
            raise CatalogConfigError("iceberg.catalog.config: a hadoop catalog needs warehouse "
                                     "(a directory, e.g. \"file:///data/warehouse\")")
        try:
            local_warehouse(config["warehouse"])
        except ValueError as exc:
            raise CatalogConfigError(f"iceberg.catalog.config.warehouse: {exc}") from None
    elif kind in ("jdbc", "sql"):
        if not config.get("uri"):
            raise CatalogConfigError(f"iceberg.catalog.config: a {kind} catalog needs uri "
                                     "(e.g. \"jdbc:postgresql://127.0.0.1:5432/db\" or \"jdbc:sqlite:/path/catalog.db\")")
        sqlalchemy_url(config)
    elif not config.get("uri"):
        raise CatalogConfigError("iceberg.catalog.config: a rest catalog needs uri (the catalog's http(s) address)")
    catalog_location(config)     # its address read as every pipeline's target keys read it (a port)


def sqlalchemy_url(config: dict) -> str:
    """The SQLAlchemy URL of a jdbc/sql catalog's database."""
    uri = str(config["uri"]).strip()
    if not uri.startswith("jdbc:"):
        if "://" not in uri:
            raise CatalogConfigError(f"iceberg.catalog.config.uri: {uri!r} is neither a JDBC URL nor an SQLAlchemy URL")
        return uri
    rest = uri[len("jdbc:"):]
    if rest.startswith("sqlite:"):
        path = rest[len("sqlite:"):]
        if path.startswith("//"):
            path = path[2:]
        return "sqlite:///" + path.lstrip("/") if not path.startswith("/") else "sqlite:///" + path
    if rest.startswith("postgresql:"):
        parts = urlsplit(rest)
        user = config.get("jdbc.user") or config.get("user")
        password = config.get("jdbc.password") or config.get("password")
        auth = ""
        if user:
            auth = quote(str(user), safe="") + (":" + quote(str(password), safe="") if password else "") + "@"
        return f"postgresql+psycopg://{auth}{parts.netloc}{parts.path}"
    raise CatalogConfigError(f"iceberg.catalog.config.uri: {uri!r}: SeaTide's JDBC catalog runs on PostgreSQL "
                             "(jdbc:postgresql://host:port/db) or SQLite (jdbc:sqlite:/path)")


def catalog_location(config: dict, as_spelled: bool = False) -> str:
    """Where the catalog of ``config`` keeps its tables, without credentials or spelling: two configs
    with one location are one catalog, whatever their user, password, token or other properties
    (which a resumed job may change). A warehouse path resolved (``file:`` URI or path, ``//``,
    ``..``: review N8); a SQL catalog's database as ``dialect://host[:port]/db`` (jdbc: and
    SQLAlchemy forms alike, the host in lower case, the dialect's default port left out, a SQLite
    file's path resolved: N8); a REST uri's host case, default port and trailing slash (N6).
    ``as_spelled``: the location as written, as the versions before N6 (a REST uri) and N8 (a
    warehouse, a SQL address) named it (``keys.located_key``, ``keys.landed_key``)."""
    kind = catalog_type(config)
    if kind == "hadoop":
        path = local_warehouse(config["warehouse"])
        return "hadoop:" + (path if as_spelled else _resolved(path))
    if kind in ("jdbc", "sql"):
        url = sqlalchemy_url(config)
        if as_spelled:
            parts = urlsplit(url)
            return f"sql:{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"
        return "sql:" + _sql_database(url)
    parts = urlsplit(str(config["uri"]).strip())
    address = parts.netloc.rpartition("@")[2] if as_spelled else _host_and_port(parts, WEB_PORTS.get(parts.scheme))
    return f"rest:{parts.scheme}://{address}{parts.path.rstrip('/')}|{config.get('warehouse', '')}"


WEB_PORTS = {"http": 80, "https": 443}
SQL_DIALECTS = {"postgres": "postgresql", "mariadb": "mysql"}      # SQLAlchemy's other names of one database
SQL_PORTS = {"postgresql": 5432, "mysql": 3306}


def _sql_database(url: str) -> str:
    """A SQL catalog's database in one spelling: the dialect without its driver, host and port as
    ``_host_and_port``, a SQLite file's absolute path."""
    scheme, _, rest = url.partition("://")
    dialect = scheme.split("+")[0].lower()
    dialect = SQL_DIALECTS.get(dialect, dialect)
    if dialect == "sqlite":
        path = rest[1:].partition("?")[0]          # sqlite:///relative.db, sqlite:////absolute.db
        return "sqlite://" + (_resolved(os.path.abspath(path)) if path and path != ":memory:" else path)
    parts = urlsplit(f"{dialect}://{rest}")
    return f"{dialect}://{_host_and_port(parts, SQL_PORTS.get(dialect))}{_resolved(parts.path or '/')}"


def _resolved(path: str) -> str:
    """An absolute path without ``//``, ``.`` or ``..`` (POSIX keeps a leading ``//``: not here)."""
    path = posixpath.normpath(path)
    return "/" + path.lstrip("/") if path.startswith("/") else path


def _host_and_port(parts, default_port: int | None) -> str:
    """A URL's host in lower case (urlsplit's ``hostname``), its port unless ``default_port``.
    CatalogConfigError names ``uri`` for a port that is no number from 1 to 65535 (urlsplit's
    ValueError names no option, and a job would retry it at every start)."""
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host          # an IPv6 address
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise CatalogConfigError(
            f"iceberg.catalog.config.uri: the port of host {host!r} ({parts.netloc.rpartition('@')[2].rpartition(':')[2]!r}) is not a "
            "number from 1 to 65535; write the catalog's address as scheme://host:port/... (e.g. "
            "http://catalog:8181), or leave the port out for the scheme's default")
    return host if port is None or port == default_port else f"{host}:{port}"


def load_catalog(catalog_name: str, config: dict):
    """The pyiceberg catalog for ``config`` (already checked by ``check_config``)."""
    kind = catalog_type(config)
    props = {str(k): str(v) for k, v in config.items() if k not in ("type", "catalog-type")}
    if kind == "hadoop":
        from seatide.connectors.iceberg.hadoop_catalog import HadoopCatalog

        return HadoopCatalog(catalog_name, **props)
    if kind in ("jdbc", "sql"):
        from pyiceberg.catalog.sql import SqlCatalog

        props = {k: v for k, v in props.items() if not k.startswith("jdbc.") and k not in ("user", "password")}
        props["uri"] = sqlalchemy_url(config)
        if "warehouse" in props:
            try:
                props["warehouse"] = "file://" + local_warehouse(props["warehouse"])
            except ValueError:
                pass
        return SqlCatalog(catalog_name, **props)
    from pyiceberg.catalog.rest import RestCatalog

    return RestCatalog(catalog_name, **props)


@contextmanager
def looking_at(catalog_name: str, config: dict):
    """The catalog of ``config`` for a look that changes nothing (a check ahead), or None: a SQL catalog
    whose database holds no catalog tables yet, so no Iceberg table. pyiceberg's SQL catalog creates its
    tables when it is made, and SQLite the database's file when it is connected to (outside review,
    finding 8): its database is read first (a SQLite file opened read-only, never made), and the catalog
    made without creating or migrating its tables (``init_catalog_tables``, ``schema_version``)."""
    if catalog_type(config) not in ("jdbc", "sql"):
        yield load_catalog(catalog_name, config)
        return
    from sqlalchemy import create_engine, inspect

    url = _read_only(sqlalchemy_url(config))
    if url is None:
        yield None
        return
    engine = create_engine(url)
    try:
        found = inspect(engine).has_table("iceberg_tables")
    finally:
        engine.dispose()
    if not found:
        yield None
        return
    looked = {k: v for k, v in config.items() if k != "schema_version"}
    catalog = load_catalog(catalog_name, {**looked, "uri": url, "init_catalog_tables": "false"})
    try:
        yield catalog
    finally:
        catalog.engine.dispose()


def _read_only(url: str) -> str | None:
    """A SQL catalog's SQLAlchemy ``url`` for reading: a SQLite file opened read-only (None: there is
    no file, so no catalog), any other database as it is (its reads change nothing)."""
    scheme, _, rest = url.partition("://")
    if scheme.split("+")[0].lower() != "sqlite":
        return url
    path, _, query = rest[1:].partition("?")
    params = [p for p in query.split("&") if p]
    if path.startswith("file:") and "uri=true" in (p.lower() for p in params):
        # Already a SQLite URI (outside review F6: passed on as it was, its own mode or none, so connecting made
        # the file): its file looked for, and opened read-only whatever mode it named.
        if "mode=memory" in (p.lower() for p in params):
            return url
        path = unquote(urlsplit(path).path)
        params = [p for p in params if not p.lower().startswith(("mode=", "uri="))]
    if not path or path == ":memory:":
        return url
    if not os.path.exists(path):
        return None
    return f"{scheme}:///file:{quote(path)}?{''.join(p + '&' for p in params)}mode=ro&uri=true"


__all__ = ["CatalogConfigError", "SUPPORTED", "catalog_location", "catalog_type", "check_config", "flat_properties", "load_catalog", "local_warehouse", "looking_at",
           "sqlalchemy_url"]
