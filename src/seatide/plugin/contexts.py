"""What the runtime hands a plugin (the context of a read, a transform or a sink; a batch and a
staged batch) and what a plugin reports back (a held position, a lacking privilege).

Plain data, apart from the contracts themselves (``base.py``): a plugin's reader, writer or
target takes these without the classes it implements, and the runtime builds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, TextIO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class ReadContext:
    spark: "SparkSession"
    micro_batch: bool          # return a streaming DataFrame (checkpointed job)
    unbounded: bool            # STREAMING job: keep the stream open after the data ends
    parallelism: int
    max_rows_per_batch: int    # bound for one micro-batch (BATCH jobs with checkpoints)
    read_interval_ms: int      # STREAMING: how often new data may be admitted
    plugin_id: str             # unique within the job, e.g. "source[0]"
    job_id: str = ""           # names what a source creates outside Spark (a replication slot)
    pipeline_id: int = 0
    # Schema evolution (plugin/evolution.py): each table's shape the pipeline last ran with (table
    # name -> StructType JSON, kept with its checkpoint), and what the stream showed of a table whose
    # shape changed (table name -> the source's own form), when the query starts again for it.
    known_tables: dict | None = None
    seen: dict | None = None
    # The pipeline runs table by table at batch time (plan.dag.Pipeline.routed): a source that
    # can (``expands_batches``) streams split descriptors, which ``batch_rows`` turns into rows.
    expand_batches: bool = False
    # Spark's offset log of the pipeline already holds a batch: the stream goes on from it and
    # Spark asks no source for its initial offset, so a source need not measure one up front.
    resuming: bool = False


@dataclass(frozen=True)
class BatchOffsets:
    """One micro-batch's range of a source's stream, as Spark logged it (runtime/offset_log.py):
    ``start`` is None for a checkpoint's first batch, which starts at the source's initial offset."""

    start: dict | None
    end: dict


@dataclass(frozen=True)
class TransformContext:
    spark: "SparkSession"
    input_name: str            # table name the input is known by (Sql's FROM)
    output_name: str
    micro_batch: bool


@dataclass
class Batch:
    """One micro-batch handed to a sink's target (``plugin.sink_protocol``)."""

    batch_id: int
    transaction_id: str                       # stable across replays of this batch
    previous_state: dict                      # state committed with the batch before (e.g. running counts)
    # Raises when this attempt is no longer the job's current one. A sink that commits in
    # its own system (a database transaction) calls it right before that commit, so a
    # zombie driver's batch is never committed.
    fence: Callable[[], None] = lambda: None
    # Names this attempt's own staging area (its attempt id): a zombie driver still staging
    # the same batch never writes into the files its replacement is about to decide on.
    staging_tag: str = ""
    # ``decide_once(key, plan)``: record ``plan`` as the decision named ``key`` unless one stands
    # already, and return the one that stands; fenced by the attempt like a batch's decision
    # (raises once this attempt is no longer current). A target's save modes do not come here:
    # they pass the protocol's SaveModeDoor. (Jdbc decides once where a multi-table sink's
    # commit records live, under ``save_modes_key``.)
    decide_once: Callable[[str, dict], dict] = lambda key, plan: plan
    save_modes_key: str = ""      # this sink's own decisions' key, distinct per sink of a pipeline


@dataclass(frozen=True)
class StagedBatch:
    """A batch staged out of readers' sight, ready for its commit decision."""

    publish: dict     # JSON: what ``publish`` needs to make it visible (files to move)
    state: dict       # JSON: the state to commit with the batch (``{"rows": n, ...}``)


@dataclass(frozen=True)
class SinkContext:
    spark: "SparkSession"
    job_id: str
    pipeline_id: int
    plugin_id: str
    micro_batch: bool
    unbounded: bool
    stdout: TextIO
    # checkpoint.retained: a sink that records batches in its own system keeps this many
    checkpoints_retained: int = 100
    # Raises when this attempt is no longer the job's current one (``Batch.fence``), for a
    # destructive step outside a batch: a schema change the writer applies to its target.
    fence: Callable[[], None] = lambda: None
    # Every sink of the job (each pipeline's plugin, with its ``routes``): how the others spell a
    # target this sink shares with them, which an earlier SeaTide named their records by.
    job_sinks: tuple = ()
    # ``decide_once(key, plan)``: record ``plan`` as the job run's decision named ``key`` unless one
    # stands, and return the one that stands: shared by every sink, pipeline and attempt of the run
    # (the job's target records), fenced by the attempt. For what must not change between attempts
    # (Jdbc: the schema an unqualified PostgreSQL table resolved to). Without a store: ``plan``.
    decide_once: Callable[[str, dict], dict] = lambda key, plan: plan
    # The sink's state after its newest batch in the checkpoint's commit log (this lineage's), and
    # the prefix of its batches' transaction ids: what the run committed before a record the sink
    # needs existed (Jdbc: the schema a run recorded before the pin wrote an unqualified table in).
    checkpointed: Callable[[], dict] = lambda: {}
    transaction_prefix: str = ""
    # The schema.change.behavior of the pipeline's source that follows its tables' changes (None:
    # none follows): known before the first batch, where a sink asks what the changes will need
    # (Jdbc: ALTER on its tables), before ``SinkTargets.evolve`` hands it the first changes.
    schema_changes: str | None = None


@dataclass(frozen=True)
class HeldPosition:
    """What a source holds on its server for a job's run, measured now (``Source.held``)."""

    holds: str                    # what it is: the replication slot's name, the binlog file:pos
    retained_bytes: int | None    # WAL the server keeps for it, or binlog bytes it is behind; None: not known
    lost: bool = False            # the server no longer has what resuming from it needs
    state: str | None = None      # the server's word for it (a slot's wal_status), or why nothing is known


@dataclass(frozen=True)
class LeftBehind:
    """What a source's release leaves on its server, as not its to drop, while no run of SeaTide will drop
    it either (``Source.release``): the operator is told, in a warning event, and settles it."""

    held: HeldPosition      # the slot's name, the WAL the server keeps for it now (None: not known)
    why: str                # whose it is, as far as SeaTide can tell, and why the release leaves it
    settle: str             # exactly what ends it: the SQL, and when to run it


@dataclass(frozen=True)
class Lacking:
    """A privilege the job's user lacks on a sink's system (``Sink.lacking``)."""

    privilege: str       # as the system names it ("DELETE", "CREATE TEMPORARY TABLES")
    why: str             # what the sink does that needs it, in the job's terms
    required: bool = True    # False: the sink works without it, another way (its log says which)
