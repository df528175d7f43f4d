"""A pipeline's table shapes across query starts, and the changes its sinks must apply.

The shapes a pipeline's sources read their tables with are kept beside its checkpoint
(``<dir>/tables.json``), so that whichever attempt starts the query next knows what the tables
looked like to the rows already written: the source reads on from there (``ReadContext.known_tables``)
and the changes between the kept shapes and the new ones go to every sink writer before the query
starts (plugin/evolution.py). The file is written after the writers applied them: a crash in
between finds the old shapes again and applies the same changes again, which a writer sees
applied already.
"""

from __future__ import annotations

import json
import os

from seatide import failpoints
from seatide.plugin.base import PermanentError
from seatide.plugin.evolution import changes_between
from seatide.runtime.commit_log import read_json, write_json_atomic

SHAPES_FILE = "tables.json"


def known_shapes(checkpoint_dir: str) -> dict[str, str] | None:
    """Table name -> StructType JSON the pipeline last ran with (None before its first start)."""
    found = read_json(os.path.join(checkpoint_dir, SHAPES_FILE))
    return None if found is None else found["tables"]


def evolve(checkpoint_dir: str, sources: list, writers: list) -> list:
    """Hand each writer the changes of the sources' tables since the kept shapes (and the behaviour,
    also when nothing changed), then keep the new shapes. Returns the changes."""
    from pyspark.sql.types import StructType

    following = [s for s in sources if s.schema_change_behavior() is not None]
    if not following:
        return []
    known = known_shapes(checkpoint_dir) or {}
    shapes, changes = {}, []
    for source in following:
        for name, shape in source.table_shapes().items():
            shapes[name] = json.dumps(shape.jsonValue())
            if name in known:
                changes += changes_between(name, StructType.fromJson(json.loads(known[name])), shape)
    behaviour = following[0].schema_change_behavior()
    if changes and behaviour == "exception":
        raise PermanentError("the source's tables changed and schema.change.behavior = exception: "
                             + "; ".join(c.describe() for c in changes))
    for writer in writers:
        writer.evolve(changes, behaviour)
    if changes:
        failpoints.hit("driver.after_schema_change")     # applied, not yet kept: a crash must not repeat it
    write_json_atomic(os.path.join(checkpoint_dir, SHAPES_FILE), {"tables": {**known, **shapes}})
    return changes


__all__ = ["SHAPES_FILE", "evolve", "known_shapes"]
