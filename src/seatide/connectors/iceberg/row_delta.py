"""One snapshot that adds data and delete files and removes files of either kind.

pyiceberg 0.12 writes data manifests only: its producers put every added file in a DATA
manifest and rewrite a manifest they remove files from as a DATA manifest, so they can neither
add delete files nor remove them (a compaction that folds deletes in). This producer does what
Iceberg's Java ``RowDelta`` and ``RewriteFiles`` do, on pyiceberg's ``_SnapshotProducer`` (its
manifest writers, manifest list, summary and commit requirements):

* added data files go into a new DATA manifest, added delete files (equality or position) into
  a new DELETES manifest (``content = 1``); both inherit the snapshot's sequence number, which is
  what makes an equality delete of this snapshot apply to older rows only (the spec: a data
  file's data sequence number strictly lower than the delete's);
* every live manifest of the parent is carried over as it is, unless it holds a removed file:
  then it is written again, of the same content, with that file DELETED and the others EXISTING
  (their sequence numbers kept);
* the operation is ``append`` (data only), ``delete`` (no data added), ``replace`` (a
  compaction: ``rewrite = True``) or ``overwrite``.

The commit keeps pyiceberg's ``assert-ref-snapshot-id`` on the branch, so the writers' one-commit
protocol (``commits``) holds as for their other snapshots, with the meaning Iceberg's REST spec
gives it (``AssertRef``). A branch that does not exist yet starts at main's current snapshot, as
in Iceberg: the snapshot's parent is main's head, and the commit creates the branch.
"""

from __future__ import annotations

from pyiceberg.manifest import (DataFileContent, ManifestContent, ManifestEntry, ManifestEntryStatus,
                                ManifestWriterV2)
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update import AssertRefSnapshotId
from pyiceberg.table.update.snapshot import _SnapshotProducer


class RowDeltaError(ValueError):
    """A file to remove is not live in the branch head the snapshot is built on."""


class AssertRef(AssertRefSnapshotId):
    """``assert-ref-snapshot-id`` as Iceberg's REST spec (and Iceberg's Java catalogs) check it:
    the ref points at ``snapshot_id``; a null ``snapshot_id`` means the ref does not exist yet.
    pyiceberg 0.12 also refuses every ref but main on a table without snapshots, so a branch of a
    new table could never get its first commit (SeaTunnel's ``commit-branch`` on a new table)."""

    def validate(self, base_metadata) -> None:
        if base_metadata is None:
            raise CommitFailedException("Requirement failed: current table metadata is missing")
        ref = base_metadata.refs.get(self.ref)
        if ref is None:
            if self.snapshot_id is not None:
                raise CommitFailedException(f"Requirement failed: branch or tag {self.ref} is missing, "
                                            f"expected {self.snapshot_id}")
        elif self.snapshot_id is None:
            raise CommitFailedException(f"Requirement failed: {ref.snapshot_ref_type} {self.ref} was created "
                                        "concurrently")
        elif self.snapshot_id != ref.snapshot_id:
            raise CommitFailedException(f"Requirement failed: {ref.snapshot_ref_type} {self.ref} has changed: "
                                        f"expected id {self.snapshot_id}, found {ref.snapshot_id}")


def as_the_spec_says(requirements) -> tuple:
    """``requirements`` with every ``assert-ref-snapshot-id`` checked as the spec says (``AssertRef``)."""
    return tuple(AssertRef(ref=r.ref, snapshot_id=r.snapshot_id) if isinstance(r, AssertRefSnapshotId) else r
                 for r in requirements)


class _DeleteManifestWriter(ManifestWriterV2):
    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class RowDelta(_SnapshotProducer["RowDelta"]):
    def __init__(self, transaction, branch: str, summary: dict, added: list, removed: list, rewrite: bool = False):
        data = [f for f in added if f.content == DataFileContent.DATA]
        deletes = [f for f in added if f.content != DataFileContent.DATA]
        if rewrite:
            operation = Operation.REPLACE
        elif not data:
            operation = Operation.DELETE            # rows removed, none added
        elif not deletes and not removed:
            operation = Operation.APPEND
        else:
            operation = Operation.OVERWRITE
        super().__init__(operation, transaction, transaction._table.io, snapshot_properties=summary, branch=branch)
        metadata = transaction.table_metadata
        if branch not in metadata.refs and metadata.current_snapshot() is not None:
            self._parent_snapshot_id = metadata.current_snapshot().snapshot_id     # a new branch starts at main's
            self._starting_snapshot_id = self._parent_snapshot_id
        self._added_data_files = data
        self._added_delete_files = deletes
        # files to remove, DataFiles or their paths: found in the parent's manifests as they are
        # carried over (one read of them), which also proves each still live
        self._removed_paths = {f if isinstance(f, str) else f.file_path for f in removed}
        self._removed_files: list = []

    def _commit(self):
        updates, requirements = super()._commit()
        return updates, as_the_spec_says(requirements)

    def _deleted_entries(self) -> list[ManifestEntry]:
        return []      # written in the carried manifests, beside the files they keep

    def _existing_manifests(self) -> list:
        return self._carried_manifests()

    def _manifests(self) -> list:
        spec = self._transaction.table_metadata.spec()
        out = []
        for files, writer in ((self._added_data_files, self.new_manifest_writer),
                              (self._added_delete_files, self._new_delete_writer)):
            if not files:
                continue
            with writer(spec) as manifest:
                for data_file in files:
                    manifest.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=self._snapshot_id,
                                                         sequence_number=None, file_sequence_number=None,
                                                         data_file=data_file))
            out.append(manifest.to_manifest_file())
        return out + self._carried_manifests()

    def _new_delete_writer(self, spec):
        return _DeleteManifestWriter(spec, self.schema(), self.new_manifest_output(), self._snapshot_id,
                                     self._compression)

    def _carried_manifests(self) -> list:
        parent = (self._transaction.table_metadata.snapshot_by_id(self._parent_snapshot_id)
                  if self._parent_snapshot_id is not None else None)
        removed = self._removed_paths
        found: set[str] = set()
        self._removed_files = []
        out = []
        for manifest in parent.manifests(self._io) if parent is not None else ():
            if not (manifest.has_added_files() or manifest.has_existing_files()):
                continue          # only entries a parent snapshot deleted: nothing live
            if not removed:
                out.append(manifest)
                continue
            entries = manifest.fetch_manifest_entry(self._io, discard_deleted=True)
            hits = {e.data_file.file_path for e in entries} & removed
            if not hits:
                out.append(manifest)
                continue
            found |= hits
            self._removed_files += [e.data_file for e in entries if e.data_file.file_path in hits]
            make = self._new_delete_writer if manifest.content == ManifestContent.DELETES else self.new_manifest_writer
            with make(self.spec(manifest.partition_spec_id)) as writer:
                for entry in entries:
                    (writer.delete if entry.data_file.file_path in hits else writer.existing)(entry)
            out.append(writer.to_manifest_file())
        missing = removed - found
        if missing:
            raise RowDeltaError(f"{len(missing)} files to remove are not in the branch head (e.g. {min(missing)})")
        return out

    def _summary(self, snapshot_properties=None):
        from pyiceberg.table.snapshots import Summary

        kept = self._added_data_files, self._deleted_data_files, self._operation
        self._added_data_files = [*kept[0], *self._added_delete_files]
        self._deleted_data_files = set(self._removed_files)
        if self._operation == Operation.REPLACE:     # pyiceberg totals up the other three only
            self._operation = Operation.OVERWRITE
        try:
            summary = super()._summary(snapshot_properties or {})
        finally:
            self._added_data_files, self._deleted_data_files, self._operation = kept
        return Summary(self._operation, **summary.additional_properties)


__all__ = ["AssertRef", "RowDelta", "RowDeltaError", "as_the_spec_says"]
