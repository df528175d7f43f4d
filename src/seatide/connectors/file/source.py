"""LocalFile source: SeaTunnel's file source on the local filesystem, read by Spark."""

from __future__ import annotations

import os
import re

from seatide.connectors.file import formats
from seatide.connectors.file.errors import LocalFileError
from seatide.connectors.file.listing import FileFilter, list_files, total_bytes
from seatide.connectors.file.paths import local_path, spark_uri
from seatide.connectors.file.reading import FileReadPlan
from seatide.plugin.base import ReadContext, Source
from seatide.plugin.options import BOOL, INT, REQUIRED, STRING, STRING_LIST, Option, enum
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ROW_KIND_COLUMN, RowKind
from seatide.plugin.schema import Schema, read_schema, schema_options

# Micro-batch sizing: Spark bounds a file stream's batch by files, not rows, so rows per
# file are estimated from file sizes with deliberately small bytes-per-row figures (a
# batch then rather holds fewer rows than max_rows_per_batch than more).
_BYTES_PER_ROW = {"parquet": 4, "orc": 4}
_DEFAULT_BYTES_PER_ROW = 16
_FILES_PER_BATCH_WHEN_EMPTY = 64
# Spark's file stream skips files older than maxFileAge (7 days by default, measured from
# the newest file) once the first batch has passed: an old file copied in would be lost.
_MAX_FILE_AGE = "36500d"


@register
class LocalFileSource(Source):
    """Reads text, csv, json, parquet or orc files under ``path`` (a directory or one file).

    Files and directories whose names start with ``.`` or ``_`` are skipped (staging areas,
    ``_SUCCESS``). With ``parse_partition_from_path`` (the default) Spark reads the files in
    ``path`` and in ``key=value`` directories below it, whose names become fields; without it
    every subdirectory is read and no fields are added. In a checkpointed job the files are read as a Spark
    file stream: each micro-batch takes whole files, as many as are estimated to hold
    ``micro-batch.max-rows`` rows, and files added later are picked up by STREAMING jobs.
    """

    plugin_name = "LocalFile"
    options = (
        Option("path", STRING, REQUIRED, "directory or file to read (/dir or file:///dir)"),
        Option("file_format_type", enum(*formats.FORMATS), REQUIRED, "text, csv, json, parquet or orc"),
        # schema { fields { name = type, ... } } or schema { columns = [...] }: needed for json,
        # optional for text and csv (without it each line is one 'content' field), read from
        # the files for parquet/orc
        *schema_options(),
        Option("read_columns", STRING_LIST, None, "fields to keep, in this order (default all)"),
        Option("field_delimiter", STRING, None, "text: field separator (default \\001); csv: (default ,)",
               aliases=("delimiter",)),
        Option("row_delimiter", STRING, "\n", "line separator of text, csv and json files"),
        Option("skip_header_row_number", INT, 0, "text and csv: lines to skip at the top of every file"),
        Option("csv_use_header_line", BOOL, False,
               "csv: the first line names the fields (all strings when no schema is given)"),
        Option("file_filter_pattern", STRING, None,
               "regular expression over file names; over the full path when it starts with path"),
        Option("filename_extension", STRING, None, "only read files with this extension (csv, .txt)"),
        Option("parse_partition_from_path", BOOL, True,
               "add fields from key=value directories in the file paths"),
        Option("encoding", STRING, "UTF-8",
               "character set of csv, json and text-with-schema files (other text is read as UTF-8)"),
        Option("null_format", STRING, None, "text and csv: the string that stands for null (e.g. \\N)"),
        Option("date_format", STRING, "yyyy-MM-dd", "how dates are written (applied when given)"),
        Option("datetime_format", STRING, "yyyy-MM-dd HH:mm:ss",
               "how timestamps are written (applied when given; otherwise ISO-8601 forms are read)"),
        Option("time_format", STRING, "HH:mm:ss", "accepted for compatibility; times are read as HH:mm:ss[.S]"),
        Option("quote_char", STRING, None, "csv: quote character (default \")"),
        Option("escape_char", STRING, None, "csv: escape character inside quotes (default \\)"),
        Option("compress_codec", STRING, "none",
               "accepted for compatibility: Spark recognises compressed files by their extension "
               "(.gz, .bz2, .deflate, .lz4, .snappy); parquet and orc carry their own"),
    )

    def check(self) -> None:
        opts = self.opts
        try:
            self.root = local_path(opts["path"])
        except ValueError as exc:
            raise self.invalid("path", f"option 'path': {exc}") from None
        fmt = opts["file_format_type"]
        self._declared = self._read_schema()
        if fmt == "json" and self._declared is None:
            raise self.invalid("schema.fields", "file_format_type json needs a schema: "
                               "schema { fields { name = string, age = int } }")
        self._check_values()
        self.plan = self._plan()
        self.filter = FileFilter(self.root, opts["file_filter_pattern"], opts["filename_extension"])
        if not formats.is_utf8(opts["encoding"]) and (self.plan.content_only or self.plan.line_route):
            raise self.invalid("encoding", f"option 'encoding': {opts['encoding']} text is only "
                               "readable with a schema and at most one header line; without them "
                               "files are read as UTF-8")
        self._check_read_columns()

    def _read_schema(self):
        self._catalog = read_schema(self.opts, check_keys=self.check_keys)
        return self._catalog.struct if self._catalog is not None else None

    def declared_schema(self) -> Schema | None:
        return self._catalog

    def _check_values(self) -> None:
        opts = self.opts
        if opts["skip_header_row_number"] < 0:
            raise self.invalid("skip_header_row_number", "option 'skip_header_row_number' must be 0 or more")
        for key in ("field_delimiter", "row_delimiter"):
            if opts[key] == "":
                raise self.invalid(key, f"option '{key}' must not be empty")
        if opts["file_filter_pattern"] is not None:
            try:
                re.compile(opts["file_filter_pattern"])
            except re.error as exc:
                raise self.invalid("file_filter_pattern", f"option 'file_filter_pattern' is not a "
                                   f"regular expression: {exc}") from None
        error = formats.encoding_error(opts["encoding"])
        if error:
            raise self.invalid("encoding", f"option 'encoding': {error}")

    def _plan(self) -> FileReadPlan:
        opts, fmt = self.opts, self.opts["file_format_type"]
        return FileReadPlan(
            file_format=fmt, schema=self._declared,
            delimiter=opts["field_delimiter"] or formats.DEFAULT_DELIMITER.get(fmt, ","),
            row_delimiter=opts["row_delimiter"] if opts.given("row_delimiter") else None,
            skip_lines=opts["skip_header_row_number"],
            header_names=fmt == "csv" and opts["csv_use_header_line"] and self._declared is None,
            encoding=opts["encoding"], null_format=opts["null_format"],
            date_format=opts["date_format"] if opts.given("date_format") else None,
            datetime_format=opts["datetime_format"] if opts.given("datetime_format") else None,
            quote_char=opts["quote_char"], escape_char=opts["escape_char"],
            recursive=not opts["parse_partition_from_path"])

    def _check_read_columns(self) -> None:
        wanted, known = self.opts["read_columns"], self._known_schema()
        if wanted and known is not None:
            missing = [c for c in wanted if c not in known.names]
            if missing:
                raise self.invalid("read_columns", f"read_columns names {', '.join(missing)}, which "
                                   f"the schema does not have (fields: {', '.join(known.names)})")

    def _known_schema(self):
        """The rows' type without reading data, or None when partitions or files decide it."""
        from pyspark.sql import types as T

        if self.opts["parse_partition_from_path"] and _has_partition_dirs(self.root):
            return None
        if self.plan.content_only:
            return T.StructType([T.StructField("content", T.StringType())])
        return self._declared

    def schema(self):
        from pyspark.sql import types as T

        known, wanted = self._known_schema(), self.opts["read_columns"]
        if known is None or not wanted:
            return known
        return T.StructType([known[c] for c in wanted])

    # --- reading -----------------------------------------------------------------------

    def read(self, ctx: ReadContext):
        from pyspark.sql import functions as F

        if not os.path.exists(self.root):
            raise LocalFileError(f"LocalFile source: path {self.root} does not exist")
        files = list_files(self.root, self.filter, recursive=self.plan.recursive)
        if not files and self._declared is None and self.opts["file_format_type"] in ("parquet", "orc"):
            raise LocalFileError(
                f"LocalFile source: no {self.opts['file_format_type']} files under {self.root} to "
                "read the schema from; add files or declare schema { fields { ... } }")
        df = self._stream(ctx, files) if ctx.micro_batch else self._batch(ctx, files)
        wanted = self.opts["read_columns"]
        if wanted:
            missing = [c for c in wanted if c not in df.columns]
            if missing:
                raise LocalFileError(f"LocalFile source: read_columns names {', '.join(missing)}, "
                                     f"which the files do not have (fields: {', '.join(df.columns)})")
            df = df.select(*[F.col("`" + c.replace("`", "``") + "`") for c in wanted])
        return df.withColumn(ROW_KIND_COLUMN, F.lit(int(RowKind.INSERT)).cast("tinyint"))

    def counted_by_spark(self) -> bool:
        # Spark's file source counts what its scan returns: every row, unless whole files are
        # split into lines here (line_route) or a file-name filter drops rows after the scan.
        return not self.plan.line_route and not self.filter.active

    def _reader(self, spark_reader):
        if os.path.isdir(self.root):
            return spark_reader.option("basePath", spark_uri(self.root))
        return spark_reader

    def _batch(self, ctx: ReadContext, files: list[str]):
        if not self.filter.active:
            return self.plan.parse(self.plan.raw(ctx.spark.read, spark_uri(self.root)))
        if not files:
            from pyspark.sql import types as T

            schema = self._known_schema() or self._declared or T.StructType([])
            return ctx.spark.createDataFrame([], schema)
        raw = self.plan.raw(self._reader(ctx.spark.read), [spark_uri(f) for f in files])
        return self.plan.parse(raw)

    def _stream(self, ctx: ReadContext, files: list[str]):
        directory = self.root if os.path.isdir(self.root) else os.path.dirname(self.root)
        # A file stream needs its schema up front: the batch reader's, partition fields included.
        sample = [spark_uri(files[0])] if files else spark_uri(directory)
        schema = self.plan.raw(self._reader(ctx.spark.read), sample).schema
        reader = ctx.spark.readStream.options(
            maxFilesPerTrigger=str(self._files_per_batch(ctx, files)), maxFileAge=_MAX_FILE_AGE)
        if not os.path.isdir(self.root):
            reader = reader.option("pathGlobFilter", _glob_escape(os.path.basename(self.root)))
        raw = self.plan.raw(reader, spark_uri(directory), schema=schema)
        if self.filter.active:
            raw = raw.where(self.filter.spark_condition())
        return self.plan.parse(raw)

    def _files_per_batch(self, ctx: ReadContext, files: list[str]) -> int:
        if not files:
            return _FILES_PER_BATCH_WHEN_EMPTY
        per_row = _BYTES_PER_ROW.get(self.opts["file_format_type"], _DEFAULT_BYTES_PER_ROW)
        rows_per_file = max(1.0, total_bytes(files) / len(files) / per_row)
        return max(1, int(ctx.max_rows_per_batch // rows_per_file))


def _has_partition_dirs(root: str) -> bool:
    try:
        return any("=" in name and not name.startswith(".") and os.path.isdir(os.path.join(root, name))
                   for name in os.listdir(root))
    except OSError:
        return False


def _glob_escape(name: str) -> str:
    return re.sub(r"([*?\[\]{}\\])", r"\\\1", name)
