"""The state store's tables (SQLAlchemy Core), one schema for SQLite and PostgreSQL.

Everything a coordinator needs to decide what to do next lives here, written at the
moment it happens: no job, attempt, pipeline completion, checkpoint or cleanup fact is
kept only in a process's memory. Times are Unix seconds (floats).
"""

from __future__ import annotations

from sqlalchemy import (BigInteger, and_, Boolean, Column, Float, Integer, MetaData, String, Table, Text, false,
                        true, UniqueConstraint, Index)

metadata = MetaData()

# Before Alembic: the version of the schema. Kept so that a SeaTide older than Alembic refuses
# a store upgraded by a newer one (it reads a version above its own); see store.migrations.
schema_version = Table(
    "schema_version", metadata,
    Column("version", Integer, primary_key=True),
    Column("applied_at", Float, nullable=False),
)

# The leader lease: one row (id = 1). The epoch only ever grows; every leader write checks it.
# Called ``leader_lease`` before revision 0022: a SeaTide from before it finds no such table, so it can
# neither elect, renew nor write as leader on a store upgraded past it (store/node_features.py).
leadership = Table(
    "leadership", metadata,
    Column("id", Integer, primary_key=True),
    Column("node_id", String(128)),
    Column("epoch", BigInteger, nullable=False),
    Column("expires_at", Float, nullable=False),
    Column("url", String(256)),
    Column("acquired_at", Float),
    # The holder also holds the leader liveness lock: once that lock is free, the holder is
    # dead and a follower holding the lock may take over before the expiry (lease.py).
    Column("liveness", Boolean, nullable=False, default=False, server_default=false()),
    # The epoch the lease had when revision 0022 moved it here (0: none had been taken, or a store made at
    # 0022). Its holder may be an older SeaTide until a later epoch is elected (intents.py).
    Column("moved_at_epoch", BigInteger, nullable=False, default=0, server_default="0"),
)

nodes = Table(
    "nodes", metadata,
    Column("node_id", String(128), primary_key=True),
    Column("role", String(16), nullable=False),          # coordinator | worker
    Column("host", String(256), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("url", String(256)),
    Column("slots", Integer, nullable=False, default=0),
    Column("started_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
    Column("stopped", Boolean, nullable=False, default=False),
    # Holds its liveness lock for its life: once that lock is free, the node is dead
    # (store/liveness.py). False: judged by its heartbeat alone.
    Column("liveness", Boolean, nullable=False, default=False, server_default=false()),
    # What the node's SeaTide can do, comma-separated (store/node_features.py); NULL: a SeaTide from before.
    Column("features", String(256)),
)

# One row per job id: its current incarnation. A resume starts a new incarnation.
jobs = Table(
    "jobs", metadata,
    Column("job_id", String(64), primary_key=True),
    Column("incarnation", Integer, nullable=False),
    # The run: a job id's life from its submission to its history's expiry, across resumes. No
    # later run shares it (store/runs.py): checkpoint directories, replication slots and sink
    # transaction ids carry it, so nothing of a dead run is taken for a live one. None: a job
    # submitted before revision 0011 (its names carry the job id alone, as they did then).
    Column("run_id", String(32)),
    Column("name", String(256), nullable=False),
    Column("config", Text, nullable=False),
    Column("variables", Text, nullable=False, default="{}"),
    Column("mode", String(16), nullable=False),
    Column("desired", String(16), nullable=False),        # RUN | CANCEL | SAVEPOINT
    Column("status", String(24), nullable=False),
    Column("retries_used", Integer, nullable=False, default=0),
    Column("max_retries", Integer, nullable=False),
    Column("retry_interval_s", Float, nullable=False),
    Column("next_attempt_at", Float),
    Column("current_attempt", BigInteger),
    Column("pinned_worker", String(128)),                 # local mode: the run's own worker
    Column("restored_from", String(128)),
    Column("restore", Text),                              # JSON: how the next attempt restores
    Column("error_msg", Text),
    Column("cleanup_delay_s", Float, nullable=False),
    Column("checkpoint_interval_ms", Integer),            # None: a plain batch job
    Column("stale_after_s", Float),                       # STREAMING: checkpoints older than this are stale
    Column("on_stale", String(8), nullable=False, default="restart"),   # warn | restart | fail
    Column("stale_since", Float),                         # set while flagged CHECKPOINT_STALE
    Column("checkpoints_retained", Integer),              # checkpoint.retained; None: the default
    Column("progress_timeout_s", Float),                  # no batch and no task progress this long: HUNG (None: off)
    Column("on_hung", String(8), nullable=False, default="restart", server_default="restart"),  # warn | restart | fail
    Column("hung_since", Float),                          # set while flagged HUNG
    Column("outline", Text),                              # env options and DAG as JSON (plan/outline.py); None before 0009
    # Cancel and release (revision 0012): REQUESTED by a user, RELEASING once the leader decided
    # it (under the lease), RELEASED once every source dropped what it held (a replication slot).
    # From REQUESTED on, the job can only be resumed fresh (store/restore.py). None: not asked.
    Column("release", String(12)),
    Column("released_at", Float),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("finished_at", Float),
)

pipelines = Table(
    "pipelines", metadata,
    Column("job_id", String(64), primary_key=True),
    Column("incarnation", Integer, primary_key=True),
    Column("pipeline_id", Integer, primary_key=True),
    Column("status", String(16), nullable=False),         # CREATED RUNNING FINISHED FAILED CANCELED
    Column("fingerprint", String(64), nullable=False),
    Column("checkpoint_dir", Text, nullable=False),
    Column("started_at", Float),
    Column("finished_at", Float),
    Column("rows_read", BigInteger, nullable=False, default=0),
    Column("rows_written", BigInteger, nullable=False, default=0),
    Column("last_batch_id", BigInteger),                  # newest batch whose sinks committed
    Column("read_batch_id", BigInteger),                  # newest batch counted in rows_read
    Column("idle", Boolean, nullable=False, default=False),
    Column("restores", Integer, nullable=False, default=0),   # starts from an existing checkpoint
    # Checkpoint rows removed by retention until revision 0008, which folded them into the
    # totals below; no longer written.
    Column("pruned_completed", BigInteger, nullable=False, default=0, server_default="0"),
    Column("pruned_failed", BigInteger, nullable=False, default=0, server_default="0"),
    # Every checkpoint this pipeline recorded, pruned rows included, and its newest COMPLETED
    # one: kept by the driver's commit transaction, so lists and the leader's tick read one
    # row per pipeline instead of counting and seeking checkpoint rows (revision 0008). A
    # savepoint (its row says pipeline 0: it covers them all) is the job's, not counted here.
    Column("checkpoints_completed", BigInteger, nullable=False, default=0, server_default="0"),
    Column("checkpoints_failed", BigInteger, nullable=False, default=0, server_default="0"),
    Column("last_checkpoint_id", BigInteger),
    Column("last_checkpoint_at", Float),
    # ... and that checkpoint's duration and rows (revision 0010): a list shows them.
    Column("last_checkpoint_duration_ms", BigInteger),
    Column("last_checkpoint_rows", BigInteger),
    Column("error", Text),
    # When the driver last saw a Spark task of this pipeline's query complete (revision 0014):
    # the watchdog judges each pipeline, so a healthy one cannot hide a stuck one.
    Column("progress_at", Float),
    # The newest batch the driver began writing to the pipeline's sinks, and its checkpoint lineage
    # (revision 0015, store/batch_starts.py): what a sink that commits in its own system did since.
    Column("started_batch", BigInteger),
    Column("started_lineage", String(64)),
    # What the pipeline's start waits for, as its driver says (revision 0018, runtime/pipeline_start._settle):
    # job-info and the leader's stale and hung verdicts show it. None once started, and at each new start.
    Column("waiting", Text),
)

# A source's end of data, written the moment it happens.
source_ends = Table(
    "source_ends", metadata,
    Column("job_id", String(64), primary_key=True),
    Column("incarnation", Integer, primary_key=True),
    Column("pipeline_id", Integer, primary_key=True),
    Column("plugin_id", String(64), primary_key=True),
    Column("ended_at", Float, nullable=False),
)

attempts = Table(
    "attempts", metadata,
    Column("attempt_id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("job_id", String(64), nullable=False),
    Column("incarnation", Integer, nullable=False),
    Column("number", Integer, nullable=False),
    Column("worker_id", String(128)),
    Column("state", String(16), nullable=False),
    Column("pid", Integer),
    Column("created_at", Float, nullable=False),
    Column("launched_at", Float),
    Column("heartbeat_at", Float),
    Column("progress_at", Float),                         # when the driver last saw a Spark task complete
    Column("tasks_done", BigInteger),                     # Spark tasks completed by this attempt's driver
    Column("ended_at", Float),
    Column("exit_code", Integer),
    Column("error", Text),
    Column("kill_requested", Boolean, nullable=False, default=False),
    # False: it ended because the store was out of its reach (its driver fenced itself off, or its
    # worker killed it when its liveness lock's session ended), not by anything of the job's: its
    # retry does not count against job.retry.times (revision 0011).
    Column("charged", Boolean, nullable=False, default=True, server_default=true()),
    UniqueConstraint("job_id", "incarnation", "number", name="uq_attempt_number"),
    # Attempt ids fence drivers: one must never come back. SQLite reuses a deleted row's id
    # unless the table is AUTOINCREMENT (a forgotten job's attempts are deleted; a late report
    # of its attempt 9 must not pass as a new run's attempt 9). PostgreSQL's sequence never does.
    sqlite_autoincrement=True,
)
Index("ix_attempts_worker_state", attempts.c.worker_id, attempts.c.state)
# The leader reads live attempts (by state) and unfinished jobs (by status) every tick.
attempts_state_index = Index("ix_attempts_state", attempts.c.state)

checkpoints = Table(
    "checkpoints", metadata,
    Column("job_id", String(64), primary_key=True),
    Column("incarnation", Integer, primary_key=True),
    Column("checkpoint_id", BigInteger, primary_key=True),   # per job, strictly growing
    Column("pipeline_id", Integer, nullable=False),
    Column("batch_id", BigInteger, nullable=False),
    Column("kind", String(16), nullable=False),              # CHECKPOINT | SAVEPOINT
    Column("status", String(16), nullable=False),            # COMPLETED | FAILED
    Column("created_at", Float, nullable=False),
    Column("duration_ms", Integer, nullable=False),
    Column("rows", BigInteger, nullable=False),
    Column("source_offsets", Text),
    Column("fingerprint", String(64), nullable=False),
    Column("attempt_id", BigInteger, nullable=False),
)
jobs_status_index = Index("ix_jobs_status", jobs.c.status)
# The leader looks for releases to carry out every tick: a handful of rows, never a scan of the jobs.
Index("ix_jobs_release", jobs.c.release)
Index("ix_checkpoints_pipeline", checkpoints.c.job_id, checkpoints.c.incarnation,
      checkpoints.c.pipeline_id, checkpoints.c.batch_id)
# A job's newest COMPLETED checkpoint is one seek (Alembic revision 0005): what a resume and
# retention ask. The tick and the lists read the pipeline rows' totals instead (revision 0008).
# A job's savepoints (a handful, never pruned): the lists add them to the pipelines' totals
# without walking the job's checkpoint rows (revision 0008). Partial: checkpoints pay nothing.
Index("ix_checkpoints_savepoints", checkpoints.c.job_id, checkpoints.c.incarnation, checkpoints.c.checkpoint_id,
      postgresql_where=checkpoints.c.kind == "SAVEPOINT", sqlite_where=checkpoints.c.kind == "SAVEPOINT")
Index("ix_checkpoints_status", checkpoints.c.job_id, checkpoints.c.incarnation, checkpoints.c.status,
      checkpoints.c.checkpoint_id)
Index("ix_checkpoints_completed_at", checkpoints.c.job_id, checkpoints.c.incarnation, checkpoints.c.status,
      checkpoints.c.created_at)

# A file sink's commit decision for one micro-batch (runtime.commit_log): the staged files and
# their final names, plus the sink's state after the batch. Inserted by the driver in a write
# fenced by its attempt, so a replaced (zombie) driver can never decide; the files are
# published after, and a decided batch is rolled forward by whichever attempt finds it.
sink_manifests = Table(
    "sink_manifests", metadata,
    Column("job_id", String(64), primary_key=True),
    Column("incarnation", Integer, primary_key=True),
    Column("pipeline_id", Integer, primary_key=True),
    Column("plugin_id", String(64), primary_key=True),
    Column("transaction_id", String(255), primary_key=True),   # the batch in its checkpoint lineage
    Column("batch_id", BigInteger, nullable=False),
    Column("attempt_id", BigInteger, nullable=False),          # the attempt that decided
    Column("status", String(16), nullable=False),              # DECIDED | PUBLISHED
    Column("manifest", Text, nullable=False),                  # JSON: {"publish": ..., "state": ...}
    Column("decided_at", Float, nullable=False),
    Column("published_at", Float),
)
Index("ix_sink_manifests_batch", sink_manifests.c.job_id, sink_manifests.c.incarnation,
      sink_manifests.c.pipeline_id, sink_manifests.c.plugin_id, sink_manifests.c.batch_id)

# What each CDC source of a job holds on its server, as the leader last measured it (revision
# 0012, coordinator/source_watch.py): WAL a replication slot keeps, binlog a position is behind.
# Replaced at each measurement; gone with a release or the job's history.
source_holds = Table(
    "source_holds", metadata,
    Column("job_id", String(64), primary_key=True),
    Column("pipeline_id", Integer, primary_key=True),
    Column("plugin_id", String(64), primary_key=True),
    Column("incarnation", Integer, nullable=False),
    Column("connector", String(64), nullable=False),
    Column("holds", String(255)),                          # the slot's name, or the binlog file:pos
    Column("retained_bytes", BigInteger),                  # None: not known (no slot or position yet)
    Column("lost", Boolean, nullable=False, default=False),   # the server no longer has what it needs
    Column("state", String(64)),                           # wal_status, or what else the server said
    Column("error", Text),                                 # why the last measurement failed (masked)
    Column("measured_at", Float, nullable=False),
    Column("warned_at", Float),                            # over the warning threshold since
    # a pipeline the current config leaves out (a resume's --fallback fresh): still held, read from the
    # config of the incarnation where it last ran (coordinator/left_out_sources.py)
    Column("left_out", Boolean, nullable=False, default=False, server_default=false()),
)

# What a release left on a source's server that no run of SeaTide will drop (revision 0017: a slot.name whose
# owner it cannot tell; coordinator/source_release.py), kept whatever became of the run and its job row
# until the leader finds it gone or owned by a run (coordinator/left_held_watch.py): job-info, the
# overview and the UI show it, so a slot retaining WAL is never left unsaid (review finding F2).
left_held = Table(
    "left_held", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("job_id", String(64), nullable=False),
    Column("run_id", String(32)),                          # the run whose release left it
    Column("incarnation", Integer),
    Column("plugin_id", String(64), nullable=False),
    Column("connector", String(64), nullable=False),
    Column("holds", String(255), nullable=False),          # the slot's name
    Column("retained_bytes", BigInteger),                  # as last measured; None: not known
    Column("lost", Boolean, nullable=False, default=False),
    Column("state", String(64)),
    Column("why", Text, nullable=False),                   # masked, as every text shown
    Column("settle", Text, nullable=False),                # what ends it: the SQL, and when to run it
    # The run's job text (masked on output, never shown): the leader asks its source whether it is still held.
    Column("config", Text),
    Column("variables", Text),
    Column("left_at", Float, nullable=False),
    Column("measured_at", Float, nullable=False),
    Column("error", Text),                                 # why the last measurement failed (masked)
)
Index("ix_left_held_job", left_held.c.job_id)

# In the manner of Flink's JobResultStore: written with the terminal status.
job_results = Table(
    "job_results", metadata,
    Column("job_id", String(64), primary_key=True),
    Column("incarnation", Integer, primary_key=True),
    Column("run_id", String(32)),                           # the job's run (None before 0011)
    # The run's job text, so that its sources can release what they hold (a slot) when its
    # history expires, even after a new run of the job id has replaced the job row.
    Column("config", Text),
    Column("variables", Text),
    Column("status", String(24), nullable=False),
    Column("cleanup", String(8), nullable=False),          # DIRTY | CLEAN | EXPIRING
    Column("cleanup_due_at", Float, nullable=False),
    Column("cleanup_tries", Integer, nullable=False, default=0),
    Column("next_cleanup_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("cleaned_at", Float),
)

events = Table(
    "events", metadata,
    Column("seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("at", Float, nullable=False),
    Column("job_id", String(64)),
    Column("incarnation", Integer),
    Column("run_id", String(32)),          # the run it is about (0013); None: from before, or of no job
    Column("kind", String(48), nullable=False),
    Column("detail", Text, nullable=False, default="{}"),
    Column("epoch", BigInteger),
    Column("actor", String(128), nullable=False),
)
Index("ix_events_job", events.c.job_id, events.c.seq)
Index("ix_events_at", events.c.at)      # retention prunes by age
# what releases left, told by events alone, is looked for by every overview (store/left_held.py told_only)
Index("ix_events_kind", events.c.kind, events.c.seq)


def of_current_incarnation(table):
    """Join condition to ``jobs``: rows of ``table`` that belong to the job's current incarnation."""
    return and_(table.c.job_id == jobs.c.job_id, table.c.incarnation == jobs.c.incarnation)
