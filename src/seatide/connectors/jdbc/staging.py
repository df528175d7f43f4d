"""Where a Jdbc sink stages a batch: the staging tables' names, which of them a writer may drop,
their engine on MySQL, and Spark's writes into them.

**Names and drops.** A staging table is named for the sink, the attempt that made it and the
batch: ``seatide_stage_<sink>_a<attempt>_<batch>_<random>`` (the store never reuses an attempt
id, and a replacement's is larger than the attempt it replaces). A writer drops the staging
tables crashed or replaced attempts left when it opens, after each commit and when a bounded
pipeline ends, but only its own and older attempts' (``StageNames.drops``): a zombie never drops
a table its replacement is filling (finding 15 of issue 30), while the replacement drops what the
zombie leaves. A name without an attempt (an older SeaTide's) counts as the oldest.

**MySQL's engine.** Where Spark runs each task once (a local master, no retries, no speculation),
MySQL/MariaDB staging tables are MyISAM (``dialect.STAGE_ENGINE``): like PostgreSQL's UNLOGGED
ones they need neither crash safety nor rollback, which saves the server about 45% of its CPU
staging. But a result stage that reads a shuffle is run again after a fetch failure, also in local
mode, and a task that failed half way has written rows MyISAM cannot roll back (finding 23). A
keyed sink applies each key's last change, which the same change staged twice does not alter; rows
inserted as they are would land twice. So a keyless frame with a shuffle stages into the server's
transactional engine (``stage_engine``).

Whether a frame is deterministic (``rand()``, a Python UDF) is not asked, and need not be (stop
64's review, finding B): a keyless frame in MyISAM has no shuffle, so its writing tasks run once
and one run's rows are all there is; a keyed frame's rows staged by a failed try and again by its
rerun are two draws of the same changes, and applying each key's last change of either draw
leaves the key as some single run would have (the same change, or another value the frame could
have given it). Only on a cluster could a task run twice with neither, and there nothing stages
into MyISAM (``preferred_engine``).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import Callable, Iterator

from seatide.connectors.jdbc.dialect import STAGE_ENGINE
from seatide.connectors.jdbc.url import MYSQL

# Spark JDBC writes staged at once when a batch holds several tables: each costs about 0.3 s
# whatever its rows (planning, a connection, the commit: DESIGN.md §10), mostly waiting, so a
# few overlap well on two cores. Every staging table is this attempt's own, and nothing is
# applied until a table's every staging is done: the order they fill in changes nothing.
STAGE_WRITERS = 4

# local, local[4], local[*]: Spark's local scheduler gives a task one try; local[4,3] gives it three
_LOCAL_ONE_TRY = re.compile(r"local(\[(\d+|\*)\])?")
_ATTEMPT = re.compile(r"a(\d+)_")


class StageNames:
    """The staging tables of one sink (``sink_id``) as one attempt (``attempt``: its id) names them."""

    def __init__(self, sink_id: str):
        self.prefix = f"seatide_stage_{hashlib.sha1(sink_id.encode()).hexdigest()[:12]}_"
        self.attempt = 0

    def use_attempt(self, tag: str) -> None:
        """The attempt running the writer's batches (``Batch.staging_tag``; not a number: 0)."""
        self.attempt = int(tag) if tag.isdigit() else 0

    def new(self, schema: tuple[str, ...], batch_id: int) -> tuple[str, ...]:
        return (*schema, f"{self.prefix}a{self.attempt}_{batch_id}_{uuid.uuid4().hex[:8]}")

    def drops(self, name: str) -> bool:
        """Whether this attempt may drop the table ``name``: a staging table of this sink made by
        this attempt or an older one."""
        if not name.startswith(self.prefix):
            return False
        made_by = _ATTEMPT.match(name[len(self.prefix):])
        return (int(made_by.group(1)) if made_by else 0) <= self.attempt


def drop_leftovers(conn, dialect, schemas: set[tuple[str, ...]], names: StageNames) -> None:
    """Drop the staging tables ``names`` may drop, in each of ``schemas`` (() : the connection's)."""
    cursor = conn.cursor()
    current = "current_schema()" if dialect.name != MYSQL else "DATABASE()"
    for schema in sorted(schemas):
        cursor.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = "
                       + ("%s" if schema else current), schema or None)
        for (name,) in cursor.fetchall():
            if names.drops(name):
                cursor.execute(f"DROP TABLE IF EXISTS {dialect.qualified((*schema, name))}")
    conn.commit()


def runs_each_task_once(master: str, speculation: str | None) -> bool:
    """True when Spark runs each task of a job at most once: a failed task fails its job (no
    retry) and no speculative copy runs beside a slow one. A stage resubmitted after a fetch
    failure still runs its tasks again (``stage_engine``)."""
    return bool(_LOCAL_ONE_TRY.fullmatch(master)) and (speculation or "false").strip().lower() != "true"


def tasks_run_once(spark) -> bool:
    """Whether ``spark`` (a SparkSession; None: no Spark here) runs each task once."""
    if spark is None:
        return False
    conf = spark.sparkContext.getConf()
    return runs_each_task_once(spark.sparkContext.master, conf.get("spark.speculation", "false"))


def preferred_engine(dialect_name: str, spark) -> str | None:
    """The engine a writer stages in by default (None: the server's default)."""
    return STAGE_ENGINE if dialect_name == MYSQL and tasks_run_once(spark) else None


def stage_engine(preferred: str | None, keyed: bool, frames: list) -> str | None:
    """The engine for a staging table that ``frames`` (Spark frames) fill: ``preferred``, unless a
    row a task wrote twice would stay twice (see the module's docstring)."""
    if preferred is None or (not keyed and any(_reads_a_shuffle(df) for df in frames)):
        return None
    return preferred


def _reads_a_shuffle(df) -> bool:
    # The physical plan has the answer, but planning costs 20-100 ms a frame (50-200 ms at load
    # 20), serially before a batch's first table stages: ≈1.1-1.5 s for a whole-database job's 100
    # tables. A frame whose analysed plan (already made: 1-2 ms to print) holds only operators that
    # never need a distribution has no shuffle, and is answered from it; any other operator, or a
    # subquery (whose join may shuffle), is planned as before.
    execution = df._jdf.queryExecution()
    if _without_shuffle(execution.analyzed().toString()):
        return False
    physical = execution.executedPlan().toString()
    if "Exchange" in physical:
        return True
    # A micro-batch's frame (foreachBatch) scans the batch's RDD: its plan cannot show the shuffle
    # a transform or the query made upstream (a repartition, a join, a stateful step), and a
    # fetch failure would run the writing stage again (outside review). The RDD's lineage shows
    # it; making the RDD runs no job here (no Exchange, so no adaptive plan to materialise).
    return "ExistingRDD" in physical and "Shuffled" in execution.toRdd().toDebugString()


# Logical operators Spark plans with no Exchange of their own (none requires a distribution or
# an ordering of its child): a scan, a projection, a filter, an alias, rows in the plan, a range,
# observe.
_NO_SHUFFLE = frozenset({"Project", "Filter", "Relation", "SubqueryAlias", "LocalRelation", "Range",
                         "CollectMetrics"})
# A subquery expression (IN, EXISTS, a scalar one) in an operator: planned as a join or its own
# query, either of which may shuffle; its plan prints as the operator's inner child.
_SUBQUERY = re.compile(r"(subquery|exists|list|lateral)[^#\s]*#\d+ \[", re.IGNORECASE)
_NODE = re.compile(r"^[\s:+\-|]*([A-Za-z][A-Za-z0-9]*)")


def _without_shuffle(analysed: str) -> bool:
    """True when the analysed plan (its tree as Spark prints it, one operator a line) is surely
    planned without a shuffle; False when it may need one (then the physical plan is asked)."""
    if _SUBQUERY.search(analysed):
        return False
    for line in analysed.splitlines():
        node = _NODE.match(line)
        if line.strip() and (node is None or node.group(1) not in _NO_SHUFFLE):
            return False
    return True


def stage_all(work: list, url: str, keep_alive: Callable[[], None], every_s: float) -> Iterator[tuple[tuple, int]]:
    """Stage each (route, frame, staging table, column set) with Spark; yield each with its row count as its
    staging ends. While it waits, ``keep_alive`` runs every ``every_s`` seconds (the caller's
    transaction may be open: sink_session.py). Closing the generator early cancels the tables not
    started and waits for the others."""
    if not work:
        return
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    from pyspark.util import inheritable_thread_target

    # The writers' jobs carry this thread's job group, so stopping the pipeline cancels them too
    # (given the session, the wrapper takes its tags as well, and says nothing).
    session = work[0][1].sparkSession
    stage_one = inheritable_thread_target(session)(lambda item: item[0].stage(item[1], item[2], url, item[3]))
    pool = ThreadPoolExecutor(max_workers=min(STAGE_WRITERS, len(work)), thread_name_prefix="jdbc-stage")
    try:
        pending = {pool.submit(stage_one, item): item for item in work}
        while pending:
            done, _ = wait(pending, timeout=every_s, return_when=FIRST_COMPLETED)
            if not done:
                keep_alive()
            for future in done:
                yield pending.pop(future), future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


__all__ = ["STAGE_WRITERS", "StageNames", "drop_leftovers", "preferred_engine", "runs_each_task_once", "stage_all",
           "stage_engine", "tasks_run_once"]
