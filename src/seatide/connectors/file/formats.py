"""File formats of the LocalFile connector and how each maps onto Spark's file sources.

``text`` is SeaTunnel's delimited format (fields joined by ``field_delimiter``, ``\\001`` by
default, no quoting). Spark has no such format, so SeaTide reads and writes it with Spark's
CSV source with quoting turned off; ``csv`` is RFC-4180 CSV (``,`` by default).
"""

from __future__ import annotations

import codecs
import re

FORMATS = ("text", "csv", "json", "parquet", "orc")
TEXT_LIKE = ("text", "csv", "json")
DEFAULT_DELIMITER = {"text": "\u0001", "csv": ","}
SPARK_FORMAT = {"text": "csv", "csv": "csv", "json": "json", "parquet": "parquet", "orc": "orc"}
BASE_EXTENSION = {"text": ".txt", "csv": ".csv", "json": ".json", "parquet": ".parquet", "orc": ".orc"}

# What Spark 4.3 as shipped can write (measured): lzo needs hadoop-lzo, brotli a codec jar.
_HADOOP_CODECS = ("none", "gzip", "bzip2", "deflate", "lz4", "snappy")
CODECS = {
    "text": _HADOOP_CODECS, "csv": _HADOOP_CODECS, "json": _HADOOP_CODECS,
    "parquet": ("none", "snappy", "gzip", "lz4", "lz4_raw", "zstd"),
    "orc": ("none", "snappy", "zlib", "lz4", "zstd", "lzo"),
}

# A Spark part file: part-00000-<uuid>[-.]c000<suffix>; the suffix carries codec and format.
_PART_FILE = re.compile(r"^part-\d+-[0-9a-fA-F-]{36}(?:[.-]c\d+)?(?P<suffix>\..*)?$")


def codec_error(file_format: str, codec: str) -> str | None:
    """None when ``codec`` can be written as ``file_format``, else what to do instead."""
    if codec.lower() in CODECS[file_format]:
        return None
    return (f"compress_codec '{codec}' cannot be written as {file_format} here "
            f"(available: {', '.join(CODECS[file_format])})")


def encoding_error(encoding: str) -> str | None:
    try:
        codecs.lookup(encoding)
    except LookupError:
        return f"unknown encoding '{encoding}' (for example UTF-8, GBK, ISO-8859-1)"
    return None


def is_utf8(encoding: str) -> bool:
    return codecs.lookup(encoding).name == "utf-8"


def final_suffix(file_format: str, spark_name: str, override: str | None) -> str:
    """The extension a published file gets: ``filename_extension`` or Spark's, in our format's name."""
    if override:
        return override if override.startswith(".") else "." + override
    match = _PART_FILE.match(spark_name)
    suffix = (match.group("suffix") if match else None) or (
        spark_name[spark_name.find("."):] if "." in spark_name else "")
    if file_format == "text" and suffix.startswith(".csv"):
        suffix = ".txt" + suffix[len(".csv"):]   # text is written by Spark's CSV writer
    return suffix


def writer_options(file_format: str, *, delimiter: str, row_delimiter: str, header: bool,
                   codec: str, encoding: str, quote_mode: str) -> dict[str, str]:
    """Spark DataFrameWriter options for one format."""
    options = {"compression": codec.lower()}
    if file_format in ("text", "csv"):
        options |= {"sep": delimiter, "lineSep": row_delimiter, "header": str(header).lower(),
                    "encoding": encoding,
                    # SeaTunnel keeps values as written; Spark's CSV writer trims by default.
                    "ignoreLeadingWhiteSpace": "false", "ignoreTrailingWhiteSpace": "false"}
        if file_format == "text" or quote_mode == "NONE":
            options |= {"quote": "", "escapeQuotes": "false", "emptyValue": ""}
        elif quote_mode == "ALL":
            options["quoteAll"] = "true"
    elif file_format == "json":
        options |= {"lineSep": row_delimiter, "encoding": encoding, "ignoreNullFields": "false"}
    return options
