"""How a LocalFile source turns files into rows with Spark's own file sources.

Reading is two steps so batch and streaming share them: ``raw`` loads what Spark's file
source yields (a ``DataFrameReader`` or ``DataStreamReader`` alike), ``parse`` turns that
into the source's rows. Most formats parse in the first step; the *line route* (text
without a schema, or more than one header line to skip) loads whole files and splits them
into numbered lines, because Spark's readers can skip at most one header line per file.
"""

from __future__ import annotations

from dataclasses import dataclass

from seatide.connectors.file import formats
from seatide.plugin.types import keyed_by_other_than_text, map_keys_as, quote_field, text_keyed


@dataclass(frozen=True)
class FileReadPlan:
    file_format: str
    schema: object | None            # StructType the user declared, or None
    delimiter: str
    row_delimiter: str | None        # None: Spark's default (\n, \r\n or \r)
    skip_lines: int
    header_names: bool               # csv_use_header_line without a schema
    encoding: str
    null_format: str | None
    date_format: str | None
    datetime_format: str | None
    quote_char: str | None
    escape_char: str | None
    recursive: bool                  # not parse_partition_from_path: no partition columns

    @property
    def line_route(self) -> bool:
        if self.file_format not in ("text", "csv") or self.header_names:
            return False
        return (self.schema is None and self.skip_lines > 0) or self.skip_lines > 1

    @property
    def content_only(self) -> bool:
        """text/csv without a schema: one ``content`` column holding each line."""
        return self.file_format in ("text", "csv") and self.schema is None and not self.header_names

    def raw(self, reader, location, schema=None):
        """Load ``location`` (a path or list of files) with ``schema`` imposed when given."""
        options = {"recursiveFileLookup": "true"} if self.recursive else {}
        if self.line_route:
            fmt, options = "text", options | {"wholetext": "true"}
        elif self.content_only:
            fmt = "text"
            options |= {"lineSep": self.row_delimiter} if self.row_delimiter else {}
        else:
            fmt, options = formats.SPARK_FORMAT[self.file_format], options | self._format_options()
        imposed = schema if schema is not None else (
            None if self.line_route or self.content_only else self.schema)
        if imposed is not None:
            # JSON's keys are text: a map keyed by dates or numbers is read with string keys and
            # its keys are cast in ``parse`` (plugin.types)
            reader = reader.schema(text_keyed(imposed) if self.file_format == "json" else imposed)
        return reader.format(fmt).options(**options).load(location)

    def parse(self, raw):
        if self.line_route:
            return self._parse_lines(raw)
        if self.content_only:
            return raw.withColumnRenamed("value", "content")
        if self.file_format == "json" and self.schema is not None and keyed_by_other_than_text(self.schema):
            from pyspark.sql import functions as F

            declared = {f.name: f.dataType for f in self.schema.fields}
            return raw.select(*[map_keys_as(F.col(quote_field(c)), declared[c], to_text=False).alias(c)
                                if c in declared else F.col(quote_field(c)) for c in raw.columns])
        return raw

    def _format_options(self) -> dict[str, str]:
        options: dict[str, str] = {}
        if self.file_format in ("text", "csv"):
            options = self._csv_options() | {
                "header": str(self.skip_lines == 1 or self.header_names).lower()}
            if self.row_delimiter:
                options["lineSep"] = self.row_delimiter
        elif self.file_format == "json":
            options = {"encoding": self.encoding}
            if self.row_delimiter or not formats.is_utf8(self.encoding):
                options["lineSep"] = self.row_delimiter or "\n"
        if self.file_format in formats.TEXT_LIKE:
            options |= self._time_options()
        return options

    def _csv_options(self) -> dict[str, str]:
        options = {"sep": self.delimiter, "encoding": self.encoding}
        if self.file_format == "text":
            options["quote"] = ""      # SeaTunnel's text format has no quoting
        else:
            options |= {k: v for k, v in (("quote", self.quote_char), ("escape", self.escape_char)) if v}
        if self.null_format is not None:
            options["nullValue"] = self.null_format
        return options | self._time_options()

    def _time_options(self) -> dict[str, str]:
        options = {}
        if self.date_format:
            options["dateFormat"] = self.date_format
        if self.datetime_format:
            options |= {"timestampFormat": self.datetime_format,
                        "timestampNTZFormat": self.datetime_format}
        return options

    def _parse_lines(self, raw):
        from pyspark.sql import functions as F

        separator = "\\r?\\n" if self.row_delimiter in (None, "\n") else _java_quote(self.row_delimiter)
        partitions = [F.col(c) for c in raw.columns if c != "value"]
        lines = raw.select(*partitions, F.split("value", separator).alias("__lines"))
        lines = lines.select(*partitions, F.posexplode("__lines").alias("__pos", "__line"),
                             F.size("__lines").alias("__count"))
        lines = lines.where((F.col("__pos") >= self.skip_lines) &
                            ~((F.col("__pos") == F.col("__count") - 1) & (F.col("__line") == "")))
        if self.schema is None:
            return lines.select(F.col("__line").alias("content"), *partitions)
        parsed = F.from_csv(F.col("__line"), _ddl(self.schema), self._csv_options())
        return lines.select(parsed.alias("__row"), *partitions).select("__row.*", *partitions)


def _java_quote(text: str) -> str:
    return "\\Q" + text + "\\E"


def _ddl(schema) -> str:
    return ", ".join("`" + f.name.replace("`", "``") + "` " + f.dataType.simpleString()
                     for f in schema.fields)
