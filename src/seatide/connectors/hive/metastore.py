"""A Hive metastore reached over thrift (``metastore_uri = "thrift://host:9083"``): tables and partitions.

SeaTide reads a table's storage (location, file format, field delimiter, columns, partition keys)
from the metastore and registers the partitions its sink writes; the rows themselves are
written and read by Spark's file sources, so the job's SparkSession needs no Hive support.
"""

from __future__ import annotations

import copy
import re
import xml.etree.ElementTree as ElementTree
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlparse

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"


class HiveError(ValueError):
    pass


class MetastoreUnreachable(ConnectionError):
    """No metastore of the URIs answered: the world in the way (a restart, a network), not the job, so
    no HiveError, which the connectors make permanent; a retry may find one up."""


@dataclass(frozen=True)
class HiveTable:
    database: str
    name: str
    location: str                  # a local path
    file_format: str               # text, parquet or orc
    columns: tuple[tuple[str, str], ...]            # (name, Hive type) of the data columns
    partition_keys: tuple[tuple[str, str], ...]     # (name, Hive type)
    field_delimiter: str
    raw: object                    # the thrift Table (partitions copy its storage descriptor)


def local_location(location: str) -> str:
    value = location.strip()
    if value.startswith("file:"):
        return re.sub(r"^file:(//)?", "", value) or "/"
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", value):
        raise HiveError(f"table location {location} is not on the local filesystem; SeaTide reads and writes Hive "
                        "tables whose location is a local directory (file:/...)")
    return value


def metastore_uris(metastore_uri: str | None, hive_site_path: str | None) -> list[str]:
    """The thrift URIs to try: ``metastore_uri`` (comma-separated), else hive-site.xml's hive.metastore.uris."""
    text = metastore_uri
    if not text and hive_site_path:
        text = hive_site_properties(hive_site_path).get("hive.metastore.uris")
    uris = [u.strip() for u in (text or "").split(",") if u.strip()]
    for uri in uris:
        parsed = urlparse(uri)
        if parsed.scheme != "thrift" or not parsed.hostname:
            raise HiveError(f"metastore_uri {uri!r} must be thrift://host:port")
    return uris


def hive_site_properties(path: str) -> dict[str, str]:
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError) as exc:
        raise HiveError(f"hive_site_path {path}: cannot read it as hive-site.xml ({exc})") from None
    found = {}
    for prop in root.iter("property"):
        name, value = prop.findtext("name"), prop.findtext("value")
        if name:
            found[name.strip()] = (value or "").strip()
    return found


@contextmanager
def connect(uris: list[str]):
    """A metastore client on the first URI that answers."""
    from hive_metastore.ThriftHiveMetastore import Client
    from thrift.protocol import TBinaryProtocol
    from thrift.transport import TSocket, TTransport

    errors = []
    for uri in uris:
        parsed = urlparse(uri)
        transport = TTransport.TBufferedTransport(TSocket.TSocket(parsed.hostname, parsed.port or 9083))
        try:
            transport.open()
        except TTransport.TTransportException as exc:
            errors.append(f"{uri}: {exc}")
            continue
        try:
            yield Client(TBinaryProtocol.TBinaryProtocol(transport))
        finally:
            transport.close()
        return
    raise MetastoreUnreachable("no Hive metastore answers at " + "; ".join(errors))


def _format(table) -> str:
    sd = table.sd
    names = " ".join(filter(None, [sd.inputFormat, sd.serdeInfo.serializationLib if sd.serdeInfo else None])).lower()
    if "parquet" in names:
        return "parquet"
    if "orc" in names:
        return "orc"
    if "lazysimpleserde" in names or "textinputformat" in names:
        return "text"
    raise HiveError(f"table {table.dbName}.{table.tableName} is stored as {sd.inputFormat} "
                    f"({sd.serdeInfo.serializationLib if sd.serdeInfo else 'no serde'}); SeaTide reads and writes "
                    "text, parquet and orc tables")


def get_table(client, table_name: str) -> HiveTable:
    from hive_metastore.ttypes import NoSuchObjectException

    database, _, name = table_name.rpartition(".")
    if not database or not name:
        raise HiveError(f"table_name {table_name!r} must be database.table")
    try:
        table = client.get_table(database, name)
    except NoSuchObjectException:
        raise HiveError(f"table {table_name} does not exist in the metastore; SeaTide writes into an existing Hive "
                        "table (create it first, e.g. with Spark SQL or Hive's CREATE TABLE)") from None
    params = dict(table.sd.serdeInfo.parameters or {}) if table.sd.serdeInfo else {}
    delimiter = params.get("field.delim", params.get("serialization.format", "\u0001"))
    if delimiter.isdigit() and len(delimiter) <= 3:     # Hive also takes the delimiter's code ('1')
        delimiter = chr(int(delimiter))
    return HiveTable(database=database, name=name, location=local_location(table.sd.location),
                     file_format=_format(table), columns=tuple((c.name, c.type) for c in table.sd.cols),
                     partition_keys=tuple((k.name, k.type) for k in table.partitionKeys or ()),
                     field_delimiter=delimiter, raw=table)


def add_partitions(client, table: HiveTable, partitions: list[list[str]]) -> int:
    """Register partitions (values in key order) unless they exist; returns how many were new."""
    from hive_metastore.ttypes import AddPartitionsRequest, Partition

    if not partitions:
        return 0
    parts = []
    for values in partitions:
        sd = copy.deepcopy(table.raw.sd)
        relative = "/".join(f"{k}={escape(v)}" for (k, _), v in zip(table.partition_keys, values))
        sd.location = table.raw.sd.location.rstrip("/") + "/" + relative
        parts.append(Partition(values=list(values), dbName=table.database, tableName=table.name, sd=sd,
                               parameters={}))
    result = client.add_partitions_req(AddPartitionsRequest(dbName=table.database, tblName=table.name, parts=parts,
                                                            ifNotExists=True, needResult=True))
    return len(result.partitions or [])


def partitions(client, table: HiveTable) -> list[tuple[list[str], str]]:
    """(values, local location) of every partition of the table."""
    return [(list(p.values), local_location(p.sd.location))
            for p in client.get_partitions(table.database, table.name, -1)]


# Characters Hive (and Spark, which copies it) escapes in partition directory names.
_ESCAPED = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(1, 32)}


def escape(value: str) -> str:
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPED else ch for ch in value)


__all__ = ["DEFAULT_PARTITION", "HiveError", "HiveTable", "MetastoreUnreachable", "add_partitions", "connect", "escape",
           "get_table", "hive_site_properties", "local_location", "metastore_uris", "partitions"]
