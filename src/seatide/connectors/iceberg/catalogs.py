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

from urllib.parse import quote, urlsplit

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
    """Where the catalog of ``config`` keeps its tables, without credentials or spelling (a
    warehouse as ``file:///w`` or ``/w``; a REST uri's host case, default port and trailing
    slash): two configs with one location are one catalog, whatever their user, password, token
    or other properties (which a resumed job may change). ``as_spelled``: a REST uri's host and
    port as written, as the version before review N6 named it (``keys.located_key``)."""
    kind = catalog_type(config)
    if kind == "hadoop":
        return "hadoop:" + local_warehouse(config["warehouse"])
    if kind in ("jdbc", "sql"):
        parts = urlsplit(sqlalchemy_url(config))
        return f"sql:{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"
    parts = urlsplit(str(config["uri"]).strip())
    address = parts.netloc.rpartition("@")[2] if as_spelled else _host_and_port(parts)
    return f"rest:{parts.scheme}://{address}{parts.path.rstrip('/')}|{config.get('warehouse', '')}"


def _host_and_port(parts) -> str:
    """A URL's host in lower case (urlsplit's ``hostname``), its port unless the scheme's default."""
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host          # an IPv6 address
    port = parts.port
    return host if port is None or port == {"http": 80, "https": 443}.get(parts.scheme) else f"{host}:{port}"


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


__all__ = ["CatalogConfigError", "SUPPORTED", "catalog_location", "catalog_type", "check_config", "flat_properties", "load_catalog", "local_warehouse",
           "sqlalchemy_url"]
