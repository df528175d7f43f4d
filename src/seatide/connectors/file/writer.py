"""The LocalFile sink's writer: one micro-batch, visible only once it is decided.

Protocol for one batch (the runtime's half is in ``seatide.runtime.commit_log``):

1. ``stage_batch``: Spark writes the batch into
   ``<path>/.seatide-staging/<transaction id>/<attempt>/`` (same filesystem as the output,
   hidden from Spark readers because it starts with ``.``; one directory per attempt, so a
   zombie driver still writing the batch never touches its replacement's files). What this
   attempt staged for the batch before is deleted first, and nothing else: another
   attempt's staging is removed once the batch is decided (step 3). The final name of every
   file is fixed from the transaction id.
2. The runtime records the commit decision (the moves and the state) in the store, fenced
   by the driver's attempt. Until then no file of the batch is in the output.
3. ``publish``: files are moved into place with ``os.replace`` and the staging directory is
   removed. It is idempotent: a file already moved is left alone, so a crash half-way, or
   a zombie that decided in time racing its replacement's roll-forward, publishes once.
"""

from __future__ import annotations

import os
import shutil
import uuid
from datetime import datetime

from seatide import failpoints
from seatide.connectors.file import formats
from seatide.connectors.file.errors import LocalFileError
from seatide.connectors.file.naming import partition_dir, partition_text, partition_value
from seatide.connectors.file.paths import STAGING_DIR, is_hidden, spark_uri
from seatide.connectors.file.sink import FileSinkSpec
from seatide.plugin.base import Batch, SinkWriter, StagedBatch
from seatide.plugin.evolution import RENAME, RETIRED
from seatide.plugin.rowkind import ROW_KIND_COLUMN

_PARTITION_ALIAS = "__seatide_p"   # Spark partitions by these copies; names map back to fields


def _col(name: str):
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


class LocalFileWriter(SinkWriter):
    def __init__(self, spec: FileSinkSpec, plugin_id: str = ""):
        self.spec = spec
        self.plugin_id = plugin_id   # two sinks of one pipeline share transaction ids, not staging
        self._save_modes_done = False
        self._header_size = 0   # bytes of a header line; a file no bigger holds no rows
        self.behaviour: str | None = None      # the source's schema-change behaviour (plugin/evolution.py)
        self.renames: dict[str, str] = {}      # new name -> old, for rows from before a rename

    # --- one batch ---------------------------------------------------------------------

    publishes_files = True

    def stage_batch(self, df, batch: Batch) -> StagedBatch:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        if not batch.previous_state and not self._save_modes_done:
            self._apply_save_modes(batch)   # only before the first batch ever committed
        self._save_modes_done = True
        # Only this attempt's own earlier try: another attempt's staging of the batch may be its
        # replacement's, about to be decided (a zombie must never remove it).
        batch_dir = self._staging(batch.transaction_id)
        staging = os.path.join(batch_dir, batch.staging_tag or "0")
        shutil.rmtree(staging, ignore_errors=True)
        prepared = self._prepare(df)
        self._header_size = self._header_bytes(prepared.columns)
        if self.spec.file_format in ("parquet", "orc"):
            # Their footers hold exact row counts: counting while writing would cost a
            # per-row aggregation (~10% of a 10M-row write).
            self._spark_write(prepared, staging)
            rows = self._footer_rows(staging)
        else:
            observation = Observation(f"seatide_file_rows_{uuid.uuid4().hex}")
            self._spark_write(prepared.observe(observation, F.count(F.lit(1)).alias("rows")), staging)
            rows = int(observation.get["rows"])
        moves = self._final_names(staging, batch.transaction_id, rows)
        files = [dst for _, dst in moves]
        total = int(batch.previous_state.get("total_rows", 0)) + rows
        return StagedBatch(publish={"moves": [list(m) for m in moves], "staging": batch_dir},
                           state={"rows": rows, "files": files, "total_rows": total})

    def publish(self, publish: dict) -> None:
        for src, dst in publish["moves"]:
            self._publish_file(src, dst)
        staging = publish.get("staging")
        if staging and os.path.dirname(staging) == os.path.join(self.spec.root, STAGING_DIR):
            self._remove_staging(staging)

    def abort_batch(self, batch_id: int, intent: dict) -> None:
        for path in intent.get("files", []):
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
            self._prune_empty_dirs(os.path.dirname(path))
        staging = intent.get("staging")
        if staging and os.path.dirname(staging) == os.path.join(self.spec.root, STAGING_DIR):
            self._remove_staging(staging)

    # --- steps -------------------------------------------------------------------------

    def evolve(self, changes: list, behaviour: str) -> None:
        """Files hold the columns their batch's rows have: under evolve and try_evolve, a renamed
        column's older values go under its new name and dropped columns are left out; under lenient
        and ignore every column read is written, dropped ones too (null in later rows)."""
        self.behaviour = behaviour
        if behaviour in ("evolve", "try_evolve"):
            self.renames.update({c.new_name: c.column for c in changes if c.kind == RENAME})

    def _evolved(self, df):
        from pyspark.sql import functions as F

        if self.behaviour not in ("evolve", "try_evolve"):
            return df
        for new, old in self.renames.items():
            if old in df.columns:
                df = df.withColumn(new, F.coalesce(_col(new), _col(old)) if new in df.columns else _col(old)).drop(old)
        return df.drop(*[f.name for f in df.schema.fields if (f.metadata or {}).get(RETIRED)])

    def _prepare(self, df):
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        spec = self.spec
        df = self._evolved(df).drop(ROW_KIND_COLUMN)
        columns = list(spec.sink_columns or df.columns)
        for option, names in (("sink_columns", columns), ("partition_by", spec.partition_by)):
            missing = [c for c in names if c not in df.columns]
            if missing:
                raise LocalFileError(f"LocalFile sink: {option} names {', '.join(missing)}, which the "
                                 f"input does not have (fields: {', '.join(df.columns)})")
        kept = [c for c in columns if spec.partition_fields_in_file or c not in spec.partition_by]
        types = {f.name: f.dataType for f in df.schema.fields}
        data = []
        for name in kept:
            column, kind = _col(name), types[name]
            if isinstance(kind, T.NullType):
                # No file format stores Spark's VOID; a string column holds the same nulls.
                column = column.cast("string")
            if spec.file_format in ("text", "csv"):   # Spark's CSV writer takes no nested values
                if isinstance(kind, (T.ArrayType, T.MapType, T.StructType)):
                    column = F.to_json(column)
                elif isinstance(kind, T.BinaryType):
                    column = F.base64(column)
            data.append(column.alias(name))
        aliases = [partition_text(_col(k), types[k]).alias(f"{_PARTITION_ALIAS}{i}")
                   for i, k in enumerate(spec.partition_by)]
        out = df.select(*data, *aliases)
        return out.coalesce(1) if spec.single_file else out

    def _header_bytes(self, columns: list[str]) -> int:
        options = self.spec.spark_options
        if options.get("header") != "true":
            return 0
        names = [c for c in columns if not c.startswith(_PARTITION_ALIAS)]
        line = options["sep"].join(names) + options["lineSep"]   # unquoted: never more than Spark's
        return len(line.encode(options["encoding"]))

    def _spark_write(self, df, staging: str) -> None:
        writer = df.write.mode("overwrite").options(**self.spec.spark_options)
        if self.spec.partition_by:
            writer = writer.partitionBy(*[f"{_PARTITION_ALIAS}{i}" for i in range(len(self.spec.partition_by))])
        writer.format(formats.SPARK_FORMAT[self.spec.file_format]).save(spark_uri(staging))

    def _final_names(self, staging: str, transaction_id: str, rows: int) -> list[tuple[str, str]]:
        """(staged file, final path) pairs, in a stable order; none for an empty batch by default."""
        staged = self._staged_files(staging)
        if rows == 0:
            staged = staged[:1] if self.spec.empty_file_when_no_data else []
        else:   # Spark writes a file for every task, even one that got no rows
            staged = [f for f in staged if not self._without_rows(os.path.join(staging, *f))]
        base = self.spec.namer.base(transaction_id, datetime.now())
        moves = []
        for index, (relative_dir, name) in enumerate(staged):
            target_dir = self._target_dir(relative_dir)
            suffix = formats.final_suffix(self.spec.file_format, name, self.spec.extension)
            final = os.path.join(target_dir, f"{base}_{index}{suffix}")
            moves.append((os.path.join(staging, relative_dir, name), final))
        return moves

    def _staged_files(self, staging: str) -> list[tuple[str, str]]:
        found = []
        for directory, dirs, files in os.walk(staging):
            dirs[:] = sorted(d for d in dirs if d.startswith(_PARTITION_ALIAS) or not is_hidden(d))
            relative = os.path.relpath(directory, staging)
            found.extend(("" if relative == "." else relative, f) for f in files if not is_hidden(f))
        return sorted(found)

    def _footer_rows(self, staging: str) -> int:
        total = 0
        for relative_dir, name in self._staged_files(staging):
            path = os.path.join(staging, relative_dir, name)
            if self.spec.file_format == "parquet":
                import pyarrow.parquet as pq
                total += pq.read_metadata(path).num_rows
            else:
                import pyarrow.orc as orc
                total += orc.ORCFile(path).nrows
        return total

    def _without_rows(self, path: str) -> bool:
        """True for a staged file that certainly holds no rows (unsure: False)."""
        fmt = self.spec.file_format
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return pq.read_metadata(path).num_rows == 0
        if fmt == "orc":
            import pyarrow.orc as orc

            return orc.ORCFile(path).nrows == 0
        if self.spec.spark_options.get("compression", "none") != "none":
            return False
        return os.path.getsize(path) <= self._header_size

    def _target_dir(self, relative_dir: str) -> str:
        if not self.spec.partition_by or not relative_dir:
            return self.spec.root
        values = [partition_value(part) for part in relative_dir.split(os.sep)]
        return os.path.join(self.spec.root, partition_dir(
            self.spec.partition_expression, list(self.spec.partition_by), values))

    def _publish_file(self, src: str, dst: str) -> None:
        """One step of the publish, idempotent; tests override it to crash half-way."""
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        try:
            os.replace(src, dst)
        except FileNotFoundError:
            if not os.path.exists(dst):   # neither staged nor published: the decided data is gone
                raise LocalFileError(
                    f"LocalFile sink: the decided batch's staged file {src} is gone and {dst} was never "
                    f"published; something removed {os.path.join(self.spec.root, STAGING_DIR)} while the "
                    "job ran. Restore the file or resume the job from an earlier savepoint") from None

    # --- housekeeping ------------------------------------------------------------------

    def _staging(self, transaction_id: str) -> str:
        text = f"{transaction_id}_{self.plugin_id}" if self.plugin_id else transaction_id
        name = "".join(ch if ch.isalnum() or ch in "._=-" else "_" for ch in text)
        return os.path.join(self.spec.root, STAGING_DIR, name)

    def _remove_staging(self, staging: str) -> None:
        shutil.rmtree(staging, ignore_errors=True)
        try:
            os.rmdir(os.path.dirname(staging))   # only when no other batch is staging
        except OSError:
            pass

    def _data_files(self) -> list[str]:
        """Every file under the path a reader sees (not the hidden staging), sorted."""
        found = []
        for directory, dirs, files in os.walk(self.spec.root):
            dirs[:] = [d for d in dirs if not is_hidden(d)]
            found.extend(os.path.join(directory, name) for name in files if not is_hidden(name))
        return sorted(found)

    def _prune_empty_dirs(self, directory: str) -> None:
        root = self.spec.root
        while directory.startswith(root + os.sep):
            try:
                os.rmdir(directory)
            except OSError:
                return
            directory = os.path.dirname(directory)

    def _apply_save_modes(self, batch: Batch) -> None:
        """Before the sink's first batch. Emptying the path is decided once (``batch.decide_once``,
        fenced by the attempt) with the list of files to remove, and removes only those: a
        zombie that repeats the step after its replacement has written removes nothing of it."""
        failpoints.hit("sink.save_modes")
        root, spec = self.spec.root, self.spec
        if spec.schema_save_mode == "ERROR_WHEN_SCHEMA_NOT_EXIST" and not os.path.isdir(root):
            raise LocalFileError(f"LocalFile sink: schema_save_mode is ERROR_WHEN_SCHEMA_NOT_EXIST "
                                    f"and path {root} does not exist; create it or choose "
                                    "CREATE_SCHEMA_WHEN_NOT_EXIST")
        os.makedirs(root, exist_ok=True)
        data = sorted(name for name in os.listdir(root) if not is_hidden(name))
        if spec.schema_save_mode == "RECREATE_SCHEMA" or spec.data_save_mode == "DROP_DATA":
            decided = batch.decide_once(batch.save_modes_key, {"remove": self._data_files()})
            for path in decided["remove"]:
                try:
                    os.remove(path)
                except FileNotFoundError:
                    pass          # removed by the attempt that decided it
                self._prune_empty_dirs(os.path.dirname(path))
        elif spec.data_save_mode == "ERROR_WHEN_DATA_EXISTS" and data:
            raise LocalFileError(f"LocalFile sink: data_save_mode is ERROR_WHEN_DATA_EXISTS and "
                                  f"path {root} already holds data ({', '.join(data[:3])}); "
                                  "empty it or choose APPEND_DATA or DROP_DATA")
