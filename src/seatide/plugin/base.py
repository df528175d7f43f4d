"""Plugin contracts: sources, transforms and sinks.

A job is a DAG of plugins. Each plugin class declares its options once (``options``),
is built from a validated ``Options`` mapping, and may check cross-option rules in
``check``. At run time the Spark driver calls:

* ``Source.read(ctx)`` once per pipeline start, for a DataFrame of the source's rows plus
  the hidden ``__row_kind`` column. With ``ctx.micro_batch`` it must be a streaming
  DataFrame (``spark.readStream``) whose offsets let Spark replay a batch exactly.
* ``Transform.apply(df, ctx)`` once per pipeline start, on batch and streaming
  DataFrames alike; it must carry ``__row_kind`` through.
* ``Sink.open_targets(ctx, routes, multi)`` once per pipeline start: what the sink writes, as
  targets with its system's steps (prepare, stage, publish or apply), which the runtime drives
  through every micro-batch (a plain batch job is one batch, id 0) by the one sink protocol,
  ``seatide.plugin.sink_protocol``; every sink supplies targets. The runtime guarantees that a
  batch whose commit was recorded is never handed to a sink again.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, ClassVar

# What the runtime hands a plugin and what a plugin reports: its own module (contexts.py), and
# importable from here too, since these are the types of the contracts' signatures below.
from seatide.plugin.contexts import (Batch, BatchOffsets, HeldPosition, Lacking, LeftBehind,  # noqa: F401
                                     ReadContext, SinkContext, StagedBatch, TransformContext)
from seatide.plugin.options import KeyCheck, Option, OptionError, OptionNotice, Options
from seatide.plugin.rowkind import INSERT_ONLY, RowKind

if TYPE_CHECKING:  # pyspark is heavy; plugins import it lazily where they use it
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from seatide.config.env import JobEnv
    from seatide.plugin.schema import Schema
    from seatide.plugin.tables import TableLayout, TableRoute, TableRows


class PermanentError(Exception):
    """A failure no retry can fix (a violated Assert rule, a field that does not exist).

    The runtime fails the pipeline at once with this message instead of retrying the job.
    Code that runs in Spark's Python workers (a data source's reader) cannot raise it to
    the driver as such: it raises ``PermanentError`` all the same, and the message carries
    ``PERMANENT_MARK`` so the driver recognises it inside Spark's wrapping exception.
    """


# Put in front of a PermanentError's text when it crosses a Python worker (see above).
PERMANENT_MARK = "[seatide:permanent] "


def permanent_in_worker(message: str) -> PermanentError:
    """A PermanentError for code running in Spark's Python workers (readers on executors)."""
    return PermanentError(PERMANENT_MARK + message)


class Plugin:
    """A named, option-declaring piece of a job (``FakeSource { ... }``)."""

    kind: ClassVar[str] = ""
    plugin_name: ClassVar[str] = ""
    options: ClassVar[tuple[Option, ...]] = ()
    doc: ClassVar[str] = ""

    def __init__(self, opts: Options, parallelism: int = 1, env: "JobEnv | None" = None):
        self.opts = opts
        self.parallelism = parallelism
        self.env = env           # the job's env block, for job-wide settings (Sql: sql.udfs)
        self.notices: list[OptionNotice] = []   # warnings the job's load shows (``notice``)
        # for blocks nested in option values: unknown keys warn (into notices), or fail when strict
        self.check_keys = KeyCheck(strict=bool(env and env.strict), into=self.notices)
        self.check()

    def check(self) -> None:
        """Cross-option validation; raise ``self.invalid(option, message)``."""

    def notice(self, option: str, message: str) -> None:
        """From ``check``: a value accepted but run differently, shown as a load warning."""
        self.notices.append(OptionNotice(option, message))

    @staticmethod
    def invalid(option: str, message: str) -> OptionError:
        return OptionError(option, message)


class Source(Plugin):
    kind = "source"
    # Options a checkpoint survives a change of: the source finds in its own offsets which tables
    # they cover, so a resume with tables added (or removed) reads each one from where it is
    # (the CDC sources' table lists: docs/design/multi-table.md, "Tables added to a stopped job").
    # Left out of the pipeline's fingerprint (plan.dag.Pipeline.fingerprint).
    table_list_options: tuple[str, ...] = ()

    def schema(self) -> "StructType | None":
        """The row type when known before running (None: discovered at run time)."""
        return None

    def declared_schema(self) -> "Schema | None":
        """The job's ``schema { ... }`` block with table name and keys (plugin.schema), if any."""
        return None

    def row_kinds(self) -> frozenset[RowKind]:
        """Kinds this source may emit; sinks are checked against them at validation."""
        return INSERT_ONLY

    def read(self, ctx: ReadContext) -> "DataFrame":
        raise NotImplementedError

    def planned_rows(self, ctx: ReadContext) -> int | None:
        """Rows a plain BATCH read will return, when known without reading (saves counting them)."""
        return None

    def counted_by_spark(self) -> bool:
        """True when the stream ``read`` returns in micro-batch mode is Spark's own scan of the
        rows it emits, nothing dropped after it. Its progress's ``numInputRows`` is then the
        count where nothing downstream filters (a filter pushed into the scan shrinks it) or
        scans twice (PipelineFrames._frames decides), and the driver adds no count of its own to
        every batch (an ``observe`` costs a fifth more CPU a row on a file stream). False (the
        safe default) for a stream of split descriptors, rows made in Python, or rows filtered
        after the scan."""
        return False

    # -- several tables (plugin.tables, docs/design/multi-table.md) ----------------------------
    def multi_table(self) -> bool:
        """True when the source reads several tables: ``read`` then returns tagged rows
        (``plugin.tables``) and ``tables`` names them. Known from the options alone, no I/O."""
        return False

    def tables(self) -> "list[Schema] | None":
        """One schema per table the source reads, in tag order (each named by ``Schema.table``);
        may ask the database. A single-table source: its declared schema, if any."""
        declared = self.declared_schema()
        return None if declared is None else [declared]

    def expands_batches(self) -> bool:
        """True when the source's checkpointed stream carries split descriptors that ``batch_rows``
        turns into rows at batch time (the pipeline then runs table by table, as a multi-table one)."""
        return False

    def table_layout(self, ctx: ReadContext) -> "TableLayout":
        """A multi-table source's tables as its rows carry them (called at run time, after ``read``)."""
        raise NotImplementedError

    def schema_change_behavior(self) -> str | None:
        """How a change of a read table's columns reaches the sinks (plugin/evolution.BEHAVIOURS);
        None for a source whose tables do not change while it reads them."""
        return None

    def table_shapes(self) -> "dict[str, StructType]":
        """After ``read``: each table's columns as read (retired ones included), by table name."""
        return {}

    def batch_rows(self, batch: "DataFrame", ctx: ReadContext, offsets: BatchOffsets | None = None) -> "TableRows":
        """The rows of one micro-batch (or of the plain batch) of a multi-table source, from what
        ``read`` returned for it: the tagged rows themselves by default; a source whose stream
        carries split descriptors expands them here (a static DataFrame, read when written), from
        ``offsets``, the batch's range of its stream (None in the plain batch)."""
        from seatide.plugin.tables import TableRows

        return TableRows(batch)

    def batch_bound(self, end: dict) -> tuple[int, int] | None:
        """At most how many rows, and about how many bytes of values, the micro-batch of a
        single-table stream that ends at offset ``end`` holds, known from the offset alone (a
        change stream counts them when it plans the batch); None when not known. Under the bounds
        of ``runtime.local_batch`` a sink that stages rows itself gets them collected on the driver."""
        return None

    def held(self, job_id: str, pipeline_id: int, plugin_id: str, offset: dict | None,
             timeout_s: float) -> HeldPosition | None:
        """What the source holds on its server for ``job_id`` (a run key, as ``ReadContext.job_id``):
        the WAL its replication slot keeps, how far its binlog position is behind the server.

        Asked by the leader every so often while the job may still resume (running, or stopped
        and not yet released or expired: coordinator/source_watch.py), with ``offset``, the
        source's part of its pipeline's newest checkpoint (None before one). Must answer within
        about ``timeout_s`` and may raise (the server is down): the error is shown, masked.
        None (the default): the source holds nothing outside Spark.
        """
        return None

    def position_gone(self, job_id: str, pipeline_id: int, plugin_id: str, offset: dict,
                      timeout_s: float) -> str | None:
        """Why a resume from ``offset`` (the source's part of the checkpoint it restores) can never
        read on: the server no longer has what it needs (a dropped replication slot, a purged
        binlog file), in the words its read would fail with. None when it may, or when it cannot
        be told without reading (the read checks again).

        Asked by a resume before its incarnation is recorded (intents.resume): a resume whose position
        is gone is refused then, not failed after a driver has started Spark to find it out. May raise
        (the server is down) or not answer in time: the resume then goes on, and its driver's read decides.
        """
        return None

    def server_address(self) -> str | None:
        """Where the source's server is (``host:port``), for a message that says which server could
        not be reached. None (the default): no one server."""
        return None

    def shared_names(self) -> tuple[str, ...]:
        """Names of what the source holds outside Spark that the user chose (``slot.name``)
        rather than SeaTide from the job and run: every run naming them may be reading through
        them. The default: none."""
        return ()

    def release(self, job_id: str, keep: frozenset[str] = frozenset(),
                within_s: float = 10.0) -> "tuple[LeftBehind, ...]":
        """Drop what the source created outside Spark for ``job_id`` (a replication slot).

        Called by the leader's cleanup once the job's checkpoints are removed for good, so
        nothing can resume from them any more, or by its release; must be idempotent. ``keep``:
        shared names another run still names (``coordinator/source_release.py``), not dropped.
        ``within_s``: answer (or raise) within about this long: the leader holds its store's
        door meanwhile, and tries again later. Returns what it left on its server that no run
        will drop (a slot.name whose owner it cannot tell): the leader records each as a warning
        event, so the operator can settle it.
        """
        return ()

    def still_left(self, name: str, within_s: float = 5.0) -> "HeldPosition | None":
        """What ``name``, which this source's release left (``LeftBehind.held.holds``), holds on the server
        now; None once it is gone, or a run of SeaTide owns it (that run's release drops it).

        Asked by the leader (``coordinator/left_held_watch.py``) only of a source whose release left
        something: until it answers None, the operator is shown the name, what it holds and how to settle
        it. Answer (or raise) within about ``within_s``.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot tell whether what its release left is still held")


_PYTHON_SOURCES: "weakref.WeakKeyDictionary[SparkSession, set[str]]" = weakref.WeakKeyDictionary()


def use_python_data_source(spark: "SparkSession", source_class: type) -> None:
    """Register a PySpark Python data source with ``spark`` once (registering costs ~2 s)."""
    names = _PYTHON_SOURCES.setdefault(spark, set())
    if source_class.name() not in names:
        spark.dataSource.register(source_class)
        names.add(source_class.name())


class Transform(Plugin):
    kind = "transform"

    def per_table_refusal(self) -> str | None:
        """Why this transform cannot run on a multi-table input, where it is applied to each
        table's rows one micro-batch at a time (None: it can)."""
        return None

    def row_kinds(self, upstream: frozenset[RowKind]) -> frozenset[RowKind]:
        return upstream

    def catalog(self, upstream: "Schema") -> "Schema":
        """The table this transform outputs, given its input's (plan.catalog).

        By default the table stays as it is: fields may be added, none is dropped or renamed.
        Transforms that drop or rename fields narrow it with ``plan.catalog.keep_fields``.
        """
        return upstream

    def apply(self, df: "DataFrame", ctx: TransformContext) -> "DataFrame":
        raise NotImplementedError


class Sink(Plugin):
    kind = "sink"
    accepted_row_kinds: ClassVar[frozenset[RowKind]] = INSERT_ONLY
    # How to get rid of kinds this sink cannot apply; shown in the validation message.
    row_kind_hint: ClassVar[str] = (
        "put FilterRowKind { exclude_kinds = [...] } or RowKindExtractor {} before it")
    # Whether writing a batch runs its frame exactly once (one Spark action, no count, no cache):
    # Spark's count of a source's scan then counts each row once (PipelineFrames._frames).
    writes_in_one_pass: ClassVar[bool] = False

    @property
    def keeps_last_change_per_key(self) -> bool:
        """Whether the sink applies a batch's changes by key, the last per key winning. Such a
        sink gets a change stream's ``__row_seq`` (``plugin.rowkind``) and picks the last change
        by it; every other sink never sees that column."""
        return False

    def change_keys(self) -> "tuple[str, tuple[str, ...]] | None":
        return None     # (option, keys) rows are found by on a change: plan.catalog.check_change_keys

    # Options naming a path on the driver's local filesystem (LocalFile: ``path``): a relative or
    # ``~`` one is made absolute where the job is recorded, or refused (``config/local_paths.py``).
    local_path_options: ClassVar[tuple[str, ...]] = ()

    # The table the sink receives (plan.catalog), None when unknown. The loader sets it once
    # the sink is built; its options already have their placeholders filled from it.
    catalog: "Schema | None" = None

    # A sink of a multi-table input: one route per table, each with the sink built for that
    # table (options filled from its catalog); set by the loader on the first table's sink.
    routes: "list[TableRoute] | None" = None
    # Set on each sink built for one table of a multi-table input: that table's name.
    table_name: str | None = None

    @classmethod
    def table_defaults(cls, body: dict, table: "Schema | None", multi_table: bool) -> dict:
        """The sink's options as written, with what the sink takes from the table it receives
        when they are left out (the Jdbc sink: ``table`` is ``${table_name}``), before the
        placeholders are filled from ``table``."""
        return body

    def open_targets(self, ctx: SinkContext | None, routes: "list[TableRoute]", multi: bool):
        """What the sink writes, on the one protocol: a ``plugin.sink_protocol.SinkTargets`` over
        ``routes`` (one per table it receives; a single table: one route, ``multi`` False)."""
        raise NotImplementedError

    def lacking(self, schema_changes: str | None) -> "list[Lacking]":
        """Asks the sink's own system (connects to it) which privileges this job needs that its
        user lacks, for ``seatide check --connect``; ``schema_changes``: the source's
        schema.change.behavior when it follows schema changes. Raises OSError (or the client's
        own error) when the system cannot be reached. By default nothing is asked."""
        return []


__all__ = ["use_python_data_source", "Batch", "BatchOffsets", "HeldPosition", "Lacking", "LeftBehind", "StagedBatch", "PERMANENT_MARK", "PermanentError", "permanent_in_worker", "Plugin", "ReadContext", "Sink", "SinkContext", "Source",
           "Transform", "TransformContext"]
