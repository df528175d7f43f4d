"""A LocalFile target: one directory, written by every route whose ``path`` it is; a batch's
files become visible only once the batch is decided.

Its steps in the one sink protocol (the runtime's half: ``seatide.plugin.sink_protocol``):

* **prepare**: the save modes. ``save_mode_plan`` lists the files a reader sees under the path
  (DROP_DATA, RECREATE_SCHEMA), or refuses the path as it is (ERROR_WHEN_DATA_EXISTS,
  ERROR_WHEN_SCHEMA_NOT_EXIST); the door decides that list once per target, and ``destroy``
  removes those files and nothing else. ``ensure`` creates the path.
* **stage**: each route's rows are written by Spark into
  ``<path>/.seatide-staging/<route's transaction id>_<sink>/<attempt>/`` (same filesystem as the
  output, hidden from Spark readers because it starts with ``.``; one directory per attempt, so
  a zombie driver still writing the batch never touches its replacement's files). What this
  attempt staged for the batch before is deleted first, and nothing else: another attempt's
  staging goes once the batch is decided and published. The final name of every file is fixed
  from the route's transaction id.
* **publish**: the files are moved into place with ``os.replace``, then the batch's staging is
  removed. Idempotent: a file already moved is left alone, so a crash half-way, or a zombie that
  decided in time racing its replacement's roll-forward, publishes once.
"""

from __future__ import annotations

import os
import shutil
from typing import Callable

from seatide.connectors.file.errors import LocalFileError
from seatide.connectors.file.naming import partition_dir, partition_value
from seatide.connectors.file.paths import STAGING_DIR, is_hidden
from seatide.connectors.file.spec import FileSinkSpec
from seatide.connectors.file.staging import column, final_names, stage_rows
from seatide.plugin.base import Batch, StagedBatch
from seatide.plugin.evolution import RENAME, RETIRED
from seatide.plugin.sink_protocol import Target, TargetRows
from seatide.plugin.sink_targets import modes_destroy
from seatide.plugin.tables import TableRoute


class LocalFileTarget(Target):
    system = "LocalFile sink"       # how messages name the sink and the target

    def __init__(self, key: str, routes: list[TableRoute], specs: dict[int, FileSinkSpec], sink_id: str,
                 inner: tuple[str, ...] = ()):
        super().__init__(key, routes)
        self.inner = inner      # other targets' paths inside this one: never this one's data
        self.specs = specs      # each route's: they share the path (options with placeholders may differ)
        self.spec = specs[routes[0].index]
        # Only modes that remove or refuse go through the door (APPEND_DATA has nothing to decide).
        self.save_modes = self.spec.data_save_mode != "APPEND_DATA" or \
            self.spec.schema_save_mode in ("RECREATE_SCHEMA", "ERROR_WHEN_SCHEMA_NOT_EXIST")
        self.destroys = modes_destroy(self.spec.schema_save_mode, self.spec.data_save_mode)
        self.sink_id = sink_id  # two sinks of one pipeline share transaction ids, not staging
        self.behaviour: str | None = None      # the source's schema-change behaviour (plugin/evolution.py)
        self.renames: dict[str, str] = {}      # new name -> old, for rows from before a rename

    @property
    def root(self) -> str:
        return self.spec.root

    @property
    def place(self) -> str:
        return f"path {self.root}"

    # --- prepare -------------------------------------------------------------------------

    def save_mode_plan(self, schema) -> dict | None:
        root, spec = self.root, self.spec
        self._refuse_missing()
        data = self.data_files()
        if spec.schema_save_mode == "RECREATE_SCHEMA" or spec.data_save_mode == "DROP_DATA":
            # None: nothing destroyed (a put-back's check counts a plan as output destroyed, store/dropped_output.py)
            return {"remove": data} if data else None
        if spec.data_save_mode == "ERROR_WHEN_DATA_EXISTS" and data:
            shown = ", ".join(os.path.relpath(path, root) for path in data[:3])
            raise LocalFileError(f"{self.system}: data_save_mode is ERROR_WHEN_DATA_EXISTS and {self.place} already "
                                 f"holds data ({shown}); empty it or choose APPEND_DATA or DROP_DATA")
        return None

    def check_save_modes(self, schema) -> None:
        """A look in every mode: DROP_DATA under ERROR_WHEN_SCHEMA_NOT_EXIST refuses a missing path too
        (without listing the files it holds, which only its own plan needs)."""
        if self.destroys:
            self._refuse_missing()
        else:
            self.save_mode_plan(schema)

    def _refuse_missing(self) -> None:
        if self.spec.schema_save_mode == "ERROR_WHEN_SCHEMA_NOT_EXIST" and not os.path.isdir(self.root):
            raise LocalFileError(f"LocalFile sink: schema_save_mode is ERROR_WHEN_SCHEMA_NOT_EXIST and path "
                                 f"{self.root} does not exist; create it or choose CREATE_SCHEMA_WHEN_NOT_EXIST")

    def destroy(self, plan: dict, fence: Callable[[], None]) -> None:
        for path in plan["remove"]:
            try:
                os.remove(path)
            except FileNotFoundError:
                pass          # removed by whoever carried the plan out first
            self._prune_empty_dirs(os.path.dirname(path))

    def ensure(self, schema) -> None:
        os.makedirs(self.root, exist_ok=True)

    def data_files(self) -> list[str]:
        """Every file under the path a reader sees (not the hidden staging), sorted."""
        found = []
        for directory, dirs, files in os.walk(self.root):
            dirs[:] = [d for d in dirs if not is_hidden(d) and os.path.join(directory, d) not in self.inner]
            found.extend(os.path.join(directory, name) for name in files if not is_hidden(name))
        return sorted(found)

    # --- stage and publish ---------------------------------------------------------------

    def stage(self, rows: TargetRows, batch: Batch) -> StagedBatch:
        moves, batch_dirs, count = [], [], 0
        for part in rows.parts:
            spec = self.specs[part.route.index]
            batch_dir = self._staging(part.transaction_id)
            # Only this attempt's own earlier try: another attempt's staging of the batch may be its
            # replacement's, about to be decided (a zombie must never remove it).
            staging = os.path.join(batch_dir, batch.staging_tag or "0")
            shutil.rmtree(staging, ignore_errors=True)
            written, columns = stage_rows(spec, self._staged_frame(part.frame), staging)
            moves += final_names(spec, staging, part.transaction_id, written, columns,
                                 lambda relative, spec=spec: self._target_dir(spec, relative))
            batch_dirs.append(batch_dir)
            count += written
        total = int(batch.previous_state.get("total_rows", 0)) + count
        return StagedBatch(publish={"moves": [list(m) for m in moves], "staging": batch_dirs},
                           state={"rows": count, "files": [dst for _, dst in moves], "total_rows": total})

    def publish(self, part: dict) -> None:
        for src, dst in part["moves"]:
            self._publish_file(src, dst)
        staging = part.get("staging") or []
        for batch_dir in [staging] if isinstance(staging, str) else staging:
            if os.path.dirname(batch_dir) == os.path.join(self.root, STAGING_DIR):
                self._remove_staging(batch_dir)

    def abort(self, batch_id: int, intent: dict) -> None:
        for path in intent.get("files", []):
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
            self._prune_empty_dirs(os.path.dirname(path))
        staging = intent.get("staging")
        if staging and os.path.dirname(staging) == os.path.join(self.root, STAGING_DIR):
            self._remove_staging(staging)

    def _publish_file(self, src: str, dst: str) -> None:
        """One step of the publish, idempotent; tests override it to crash half-way."""
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        try:
            os.replace(src, dst)
        except FileNotFoundError:
            if not os.path.exists(dst):   # neither staged nor published: the decided data is gone
                raise LocalFileError(
                    f"LocalFile sink: the decided batch's staged file {src} is gone and {dst} was never "
                    f"published; something removed {os.path.join(self.root, STAGING_DIR)} while the "
                    "job ran. Restore the file or resume the job from an earlier savepoint") from None

    def _staged_frame(self, df):
        """The rows as the files hold them (``evolve``); Hive matches them to its table too."""
        return self._evolved(df)

    def _target_dir(self, spec: FileSinkSpec, relative_dir: str) -> str:
        if not spec.partition_by or not relative_dir:
            return spec.root
        values = [partition_value(part) for part in relative_dir.split(os.sep)]
        return os.path.join(spec.root, partition_dir(spec.partition_expression, list(spec.partition_by), values))

    # --- schema changes ------------------------------------------------------------------

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
                df = df.withColumn(new, F.coalesce(column(new), column(old)) if new in df.columns
                                   else column(old)).drop(old)
        return df.drop(*[f.name for f in df.schema.fields if (f.metadata or {}).get(RETIRED)])

    # --- housekeeping --------------------------------------------------------------------

    def _staging(self, transaction_id: str) -> str:
        text = f"{transaction_id}_{self.sink_id}" if self.sink_id else transaction_id
        name = "".join(ch if ch.isalnum() or ch in "._=-" else "_" for ch in text)
        return os.path.join(self.root, STAGING_DIR, name)

    def _remove_staging(self, staging: str) -> None:
        shutil.rmtree(staging, ignore_errors=True)
        try:
            os.rmdir(os.path.dirname(staging))   # only when no other batch is staging
        except OSError:
            pass

    def _prune_empty_dirs(self, directory: str) -> None:
        while directory.startswith(self.root + os.sep):
            try:
                os.rmdir(directory)
            except OSError:
                return
            directory = os.path.dirname(directory)


__all__ = ["LocalFileTarget"]
