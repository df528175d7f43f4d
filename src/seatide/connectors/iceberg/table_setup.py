"""Prepare an Iceberg target before its first rows: save modes, namespace, table; and evolve it.

The protocol's door (``plugin.save_mode_door.SaveModeDoor``) asks ``save_mode_plan`` what the
save modes destroy, records that once per job run and table, then has it carried out
(``destroy``) and the table made usable (``ensure``: namespace, the table created from the
input's fields when missing, primary keys as identifier fields, partition keys as identity
partitions). Each destructive step is ONE conditional catalog commit, so that a zombie driver
held anywhere in it changes nothing its replacement wrote since:

* ``RECREATE_SCHEMA`` replaces the table in place, as Iceberg's REPLACE TABLE does: a new schema
  (fresh field ids), partition spec and properties, no branch or tag left; the old snapshots stay
  in its history until expiry. The commit requires the table's uuid and its branch head as just
  read, and records the decision's token in a property (``seatide.recreated-by``): a zombie that
  read the table before its replacement recreated it loses on the head, looks again, and finds it
  done. It is not carried out over a snapshot of the job run (a pipeline of the run committed
  since the plan, under a key that spelled the table otherwise: review N8), looked for in the
  metadata whose head the commit requires. (A drop and a create cannot be one conditional step
  in a REST catalog.)
* ``DROP_DATA`` removes the files present when it was decided, those still in the branch.
"""

from __future__ import annotations

import itertools
import logging

from seatide import failpoints
from seatide.connectors.iceberg import deletes
from seatide.connectors.iceberg.commits import (COMMIT_ATTEMPTS, backoff, branch_head, carried_mark, commit_files,
                                                written_by_run)
from seatide.connectors.iceberg.schema import UnsupportedIcebergType, arrow_schema, new_table_schema
from seatide.connectors.iceberg.spec import IcebergSinkError, IcebergSinkSpec
from seatide.plugin.rowkind import HIDDEN_COLUMNS

log = logging.getLogger(__name__)

NAME_MAPPING = "schema.name-mapping.default"
RECREATED_BY = "seatide.recreated-by"


def save_mode_plan(catalog, spec: IcebergSinkSpec, struct, run: str) -> dict | None:
    """What the save modes of ``spec``'s table destroy if it is prepared now, for input fields
    ``struct`` (JSON, decided once by the protocol's door), or None; raises for a mode that refuses
    the table as it is. RECREATE_SCHEMA names the table's uuid, the fields of its replacement and a
    token its replacement's commit records (``seatide.recreated-by``); DROP_DATA the files in the branch.

    A table with a snapshot of the job run ``run`` had its save modes made: a writer of the run
    committed rows into it, and nothing is destroyed nor refused (review N1: the writer before
    the port recorded no decision where it destroyed nothing; an APPEND_DATA sink of the job
    records none). The look is in the metadata the plan names files of, so no row of the run
    committed later is in the plan."""
    import uuid

    identifier = (spec.namespace, spec.table)
    if not catalog.table_exists(identifier):
        if spec.schema_save_mode == "ERROR_WHEN_SCHEMA_NOT_EXIST":
            raise IcebergSinkError(f"Iceberg sink: schema_save_mode is ERROR_WHEN_SCHEMA_NOT_EXIST and table "
                                   f"{spec.name} does not exist; create it or choose CREATE_SCHEMA_WHEN_NOT_EXIST")
        return None
    table = catalog.load_table(identifier)
    if written_by_run(table.metadata, run):
        log.info("Iceberg sink %s: job run %s committed into the table already; its save modes were made",
                 spec.name, run)
        return None
    if spec.schema_save_mode == "RECREATE_SCHEMA":
        # the replacement has no branch nor rows: the data save mode has nothing left to do
        return {"recreate": str(table.metadata.table_uuid), "by": uuid.uuid4().hex,
                "fields": struct.json() if struct is not None else None}
    head = _head_unless_refused(table, spec)
    if spec.data_save_mode != "DROP_DATA" or head is None:
        return None
    found = deletes.plan(table, head.snapshot_id)
    return {"remove": [f.file.file_path for f in (*found.data, *found.deletes)]}


def check_save_modes(catalog, spec: IcebergSinkSpec, run: str) -> None:
    """What ``save_mode_plan`` and ``ensure`` would refuse now, a look that lists no file and changes
    nothing (``Target.check_save_modes``): a missing table under IGNORE or ERROR_WHEN_SCHEMA_NOT_EXIST,
    rows under ERROR_WHEN_DATA_EXISTS unless the job run ``run`` committed them."""
    identifier = (spec.namespace, spec.table)
    if not catalog.table_exists(identifier):
        refuse_missing(spec)
        return
    table = catalog.load_table(identifier)
    if spec.schema_save_mode != "RECREATE_SCHEMA" and not written_by_run(table.metadata, run):
        _head_unless_refused(table, spec)


def _head_unless_refused(table, spec: IcebergSinkSpec):
    """The branch's head, after refusing rows under ERROR_WHEN_DATA_EXISTS."""
    head = branch_head(table.metadata, spec.branch)
    if spec.data_save_mode == "ERROR_WHEN_DATA_EXISTS" and head is not None:
        rows = int(head.summary.additional_properties.get("total-records", 0)) if head.summary else 0
        if rows:
            raise IcebergSinkError(f"Iceberg sink: data_save_mode is ERROR_WHEN_DATA_EXISTS and table {spec.name} "
                                   f"holds {rows} rows; empty it or choose APPEND_DATA or DROP_DATA")
    return head


def refuse_missing(spec: IcebergSinkSpec) -> None:
    """``spec``'s table is missing: refused where its schema save mode makes none."""
    if spec.schema_save_mode in ("IGNORE", "ERROR_WHEN_SCHEMA_NOT_EXIST"):
        raise IcebergSinkError(f"Iceberg sink: table {spec.name} does not exist (schema_save_mode = "
                               f"{spec.schema_save_mode}); create it or choose CREATE_SCHEMA_WHEN_NOT_EXIST")


def earlier_plan(recreate: dict | None, drop_data: dict | None, token: str) -> dict | None:
    """The plan of a decision the writer before the port recorded (named ``token``): RECREATE_SCHEMA
    as ``{"table_uuid": U}`` (earlier ``{"drop_table_uuid": U}``) under ``token``, its commit
    recording ``token`` as ``seatide.recreated-by``; DROP_DATA as ``{"remove": [files]}`` under
    ``token + "_data"``. A recreate waits for the input's fields (they were not recorded), and is
    carried out only while the table is that uuid and not recreated by ``token``."""
    table_uuid = (recreate or {}).get("table_uuid", (recreate or {}).get("drop_table_uuid"))
    if table_uuid is not None:
        return {"recreate": table_uuid, "by": token, "fields": None}
    if drop_data is not None and "remove" in drop_data:
        return {"remove": list(drop_data["remove"])}
    return None


def destroy(catalog, spec: IcebergSinkSpec, plan: dict, struct=None, run: str | None = None) -> bool:
    """Carry out a decided plan, exactly what it names (idempotent: a zombie finds it done and
    changes nothing its replacement wrote since). False: a recreate waits for the input's fields
    (``struct``: a plan decided without them), to be carried out again when they are known. A
    recreate is not carried out over a snapshot of the job run ``run`` (``_recreate``)."""
    if not catalog.table_exists((spec.namespace, spec.table)):
        return True          # the decided table is gone (dropped since an earlier version decided)
    if "remove" in plan:
        _remove_files(catalog, spec, set(plan["remove"]))
        return True
    if "recreate" in plan:
        if plan.get("fields") is not None:
            import json

            from pyspark.sql.types import StructType

            struct = StructType.fromJson(json.loads(plan["fields"]))
        if struct is None:
            return False
        _recreate(catalog, spec, struct, plan["recreate"], plan["by"], run)
    return True


def ensure(catalog, spec: IcebergSinkSpec, struct) -> bool:
    """Namespace and table of ``spec`` for input fields ``struct``, without destroying anything:
    a missing table is created (CREATE_SCHEMA_WHEN_NOT_EXIST, RECREATE_SCHEMA) or refused; a table
    another writer made gets the name mapping it lacks. False: missing, and no fields to make it of."""
    from pyiceberg.exceptions import NamespaceAlreadyExistsError

    identifier = (spec.namespace, spec.table)
    if catalog.table_exists(identifier):
        _name_files(catalog.load_table(identifier))
        return True
    refuse_missing(spec)
    if struct is None:
        return False
    try:
        catalog.create_namespace(spec.namespace)
    except NamespaceAlreadyExistsError:
        pass
    _create(catalog, spec, struct)
    return True


def _fresh_layout(spec: IcebergSinkSpec, struct, next_field_id=None):
    """The schema (fresh field ids) and identity partition fields of a table for ``struct``."""
    from pyiceberg.partitioning import PartitionField
    from pyiceberg.transforms import IdentityTransform

    names = {spec.column(f.name): f.name for f in struct.fields}
    for option, keys in (("iceberg.table.primary-keys", spec.primary_keys),
                         ("iceberg.table.partition-keys", spec.partition_keys)):
        missing = [k for k in keys if spec.column(k) not in names]
        if missing:
            raise IcebergSinkError(f"Iceberg sink: {option} names {', '.join(missing)}, which the input does not "
                                   f"have (fields: {', '.join(struct.names)})")
    try:
        schema = new_table_schema(struct, [names[spec.column(k)] for k in spec.primary_keys], next_field_id)
    except UnsupportedIcebergType as exc:
        raise IcebergSinkError(f"Iceberg sink: {exc}") from None
    partitions = [names[spec.column(k)] for k in spec.partition_keys]
    fields = [PartitionField(source_id=schema.find_field(name).field_id, field_id=1000 + i,
                             transform=IdentityTransform(), name=name) for i, name in enumerate(partitions)]
    return schema, fields


def _create(catalog, spec: IcebergSinkSpec, struct) -> None:
    from pyiceberg.exceptions import TableAlreadyExistsError
    from pyiceberg.partitioning import PartitionSpec

    schema, fields = _fresh_layout(spec, struct)
    properties = {"format-version": "2", **spec.auto_create_props, **spec.write_props}
    try:
        table = catalog.create_table((spec.namespace, spec.table), schema=schema, partition_spec=PartitionSpec(*fields),
                                     properties=properties)
    except TableAlreadyExistsError:
        return           # another attempt created it
    set_name_mapping(table)


def set_name_mapping(table) -> None:
    """Files carry no field ids: the name mapping tells readers which column is which field."""
    from pyiceberg.exceptions import CommitFailedException

    mapping = table.metadata.schema().name_mapping.model_dump_json()
    if table.metadata.properties.get(NAME_MAPPING) != mapping:
        try:
            with table.transaction() as tx:
                tx.set_properties(**{NAME_MAPPING: mapping})
        except CommitFailedException:
            pass


def _name_files(table) -> None:
    """A table made by another writer may lack the name mapping, without which no Iceberg reader
    can read the files the sink writes (Spark's, without field ids): it gets the default one. A
    mapping the table has is its owner's, and stays."""
    if NAME_MAPPING not in table.metadata.properties:
        set_name_mapping(table)


def _recreate(catalog, spec: IcebergSinkSpec, struct, table_uuid: str | None, key: str, run: str | None) -> None:
    """Replace the table whose uuid the decision names, unless this decision replaced it already or
    the job run ``run`` committed rows into it since the plan (its save modes were made: a writer
    of the run whose key spelled the table otherwise decided them, review N8). The commit requires
    the head read here, so it is conditional on that look, not only on the uuid: the plan's own
    head is not required (a writer outside the job appending after the decision does not undo
    it), so without the look a recreate decided before a pipeline of the run committed replaced
    that commit."""
    from pyiceberg.exceptions import CommitFailedException

    for attempt in range(COMMIT_ATTEMPTS):
        table = catalog.load_table((spec.namespace, spec.table))
        metadata = table.metadata
        if str(metadata.table_uuid) != table_uuid or metadata.properties.get(RECREATED_BY) == key:
            return       # the decided table is gone (another's is there), or it was recreated
        if run is not None and written_by_run(metadata, run):
            log.warning("Iceberg sink %s: job run %s committed into the table since RECREATE_SCHEMA was decided; "
                        "it is not recreated over those rows", spec.name, run)
            return
        failpoints.hit("iceberg.before_recreate")
        try:
            catalog.commit_table(table, *_replacement(metadata, spec, struct, key))
            log.info("Iceberg sink %s: table recreated (RECREATE_SCHEMA)", spec.name)
            return
        except CommitFailedException:
            backoff(attempt)
    raise RuntimeError(f"Iceberg sink {spec.name}: RECREATE_SCHEMA could not commit after {COMMIT_ATTEMPTS} attempts")


def _replacement(metadata, spec: IcebergSinkSpec, struct, key: str) -> tuple[tuple, tuple]:
    """(requirements, updates) replacing the table as ``metadata`` shows it with a new one for
    ``struct``: the same uuid and history, fresh field ids, no refs, the sink's properties."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.table.update import (AddPartitionSpecUpdate, AddSchemaUpdate, AssertTableUUID,
                                        RemovePropertiesUpdate, RemoveSnapshotRefUpdate, SetCurrentSchemaUpdate,
                                        SetDefaultSpecUpdate, SetPropertiesUpdate, UpgradeFormatVersionUpdate)

    from seatide.connectors.iceberg.row_delta import AssertRef

    counter = itertools.count(metadata.last_column_id + 1)
    schema, fields = _fresh_layout(spec, struct, lambda: next(counter))
    schema = schema.model_copy(update={"schema_id": max(s.schema_id for s in metadata.schemas) + 1})
    first_field = max(metadata.last_partition_id or 999, 999) + 1
    fields = [PartitionField(source_id=f.source_id, field_id=first_field + i, transform=f.transform, name=f.name)
              for i, f in enumerate(fields)]
    same = [s for s in metadata.partition_specs if not s.fields and not fields]
    updates = [AddSchemaUpdate(schema=schema), SetCurrentSchemaUpdate(schema_id=-1)]
    if same:
        updates.append(SetDefaultSpecUpdate(spec_id=same[0].spec_id))
    else:
        spec_id = max(s.spec_id for s in metadata.partition_specs) + 1
        updates += [AddPartitionSpecUpdate(spec=PartitionSpec(*fields, spec_id=spec_id)),
                    SetDefaultSpecUpdate(spec_id=-1)]
    if metadata.format_version < 2:
        updates.append(UpgradeFormatVersionUpdate(format_version=2))
    updates += [RemoveSnapshotRefUpdate(ref_name=name) for name in metadata.refs]
    properties = {**spec.auto_create_props, **spec.write_props, RECREATED_BY: key,
                  NAME_MAPPING: schema.name_mapping.model_dump_json()}
    properties.pop("format-version", None)
    gone = [name for name in metadata.properties if name not in properties]
    if gone:
        updates.append(RemovePropertiesUpdate(removals=gone))
    updates.append(SetPropertiesUpdate(updates=properties))
    head = branch_head(metadata, spec.branch)
    ref = spec.branch if spec.branch in metadata.refs else "main"
    requirements = (AssertTableUUID(uuid=metadata.table_uuid),
                    AssertRef(ref=ref, snapshot_id=head.snapshot_id if head is not None else None))
    return requirements, tuple(updates)


def _remove_files(catalog, spec: IcebergSinkSpec, paths: set[str]) -> None:
    """One snapshot removing those of ``paths`` still in the branch (a zombie: none)."""
    from pyiceberg.exceptions import CommitFailedException

    for attempt in range(COMMIT_ATTEMPTS):
        table = catalog.load_table((spec.namespace, spec.table))
        head = branch_head(table.metadata, spec.branch)
        found = deletes.plan(table, head.snapshot_id if head is not None else None)
        present = [f.file for f in (*found.data, *found.deletes) if f.file.file_path in paths]
        if not present:
            return
        try:
            commit_files(table, spec.branch, {"seatide.save-mode": "DROP_DATA", **carried_mark(table.metadata,
                                                                                                 spec.branch)},
                         [], present)
            return
        except CommitFailedException:
            backoff(attempt)
    raise RuntimeError(f"Iceberg sink {spec.name}: DROP_DATA could not commit")


def evolve(catalog, spec: IcebergSinkSpec, table, df):
    """Add the input's new fields as columns (schema evolution), when enabled; the table as it is now."""
    have = {spec.column(f.name) for f in table.metadata.schema().fields}
    struct = df.drop(*HIDDEN_COLUMNS).schema
    new = [f for f in struct.fields if spec.column(f.name) not in have]
    if not new or not spec.schema_evolution:
        return table
    from pyiceberg.catalog import Catalog
    from pyspark.sql.types import StructType

    defaulted = {f.name: value for f in new if (value := _literal_default(f)) is not None}
    with table.update_schema(case_sensitive=spec.case_sensitive) as update:
        plain = [f for f in new if f.name not in defaulted]
        if plain:
            update.union_by_name(arrow_schema(StructType(plain)))
        if defaulted:
            # the rows already written read the source column's default (its initial default),
            # as the source server filled its own rows without a row change for them
            converted = Catalog._convert_schema_if_needed(
                arrow_schema(StructType([f for f in new if f.name in defaulted])), table.metadata.format_version)
            for field in converted.fields:
                update.add_column(field.name, field.field_type, default_value=defaulted[field.name])
    set_name_mapping(catalog.load_table((spec.namespace, spec.table)))
    log.info("Iceberg sink %s: added columns %s", spec.name, ", ".join(f.name for f in new))
    return catalog.load_table((spec.namespace, spec.table))


def _literal_default(field) -> str | None:
    """A new column's literal DEFAULT at its source (plugin/types.py), if it has one: Iceberg's initial
    default is a value, so a CURRENT_TIMESTAMP or expression default has no form there."""
    import json

    from seatide.plugin.types import SOURCE_DEFAULT

    default = (field.metadata or {}).get(SOURCE_DEFAULT)
    kind, value = json.loads(default) if default else (None, None)
    return value if kind == "literal" else None


__all__ = ["NAME_MAPPING", "RECREATED_BY", "destroy", "earlier_plan", "ensure", "evolve", "save_mode_plan", "set_name_mapping"]
