"""The MySQL shapes check's job (cdc_shapes_mysql.py): its config, a target's rows, a resume
capturing a table more, and whether the stream has caught up."""

from __future__ import annotations

import json
from decimal import Decimal

from seatide.testing.cdc_check import Endpoint
from seatide.testing.cdc_shapes_pg import Shard, ShapesOutcome
from seatide.testing.cdc_shapes_pg_check import _Runner


def job_text(source: Endpoint, target: Endpoint, shards: list[Shard], table: str, merged: bool,
             server_id: int = 5600) -> str:
    database = source.url.rsplit("/", 1)[1]
    names = ", ".join(f'"{database}.{s.name}"' for s in shards)
    sink_table = table if merged else f"{table}_${{table_name}}"
    return (f'env {{ job.mode = "STREAMING", checkpoint.interval = 1000, micro-batch.max-rows = 60 }}\n'
            f'source {{ MySQL-CDC {{ base-url = "{source.url}", username = "root", password = "",\n'
            f'  table-names = [{names}], snapshot.split.size = 7, server-id = "{server_id}",\n'
            f'  schema-changes.enabled = true }} }}\n'
            f'sink {{ Jdbc {{ url = "{target.url}", user = "{target.user}", password = "", table = "{sink_table}",\n'
            f'  primary_keys = ["id"], enable_upsert = true }} }}\n')


def table_rows(endpoint: Endpoint, table: str, added: list) -> dict:
    """id -> every column's value: the first four, then each added one (``Column``), comparable."""
    conn = endpoint.connect()
    try:
        cursor = conn.cursor()
        cursor.execute(f"SELECT {', '.join(['id', 'name', 'note', 'amount', *[c.name for c in added]])} FROM {table}")
        return {int(r[0]): (r[1], r[2], None if r[3] is None else Decimal(str(r[3])),
                            *[c.normal(v) for c, v in zip(added, r[4:])]) for r in cursor.fetchall()}
    finally:
        conn.close()


def resume_capturing(runner: _Runner, running: list, new_conf: str, outcome: ShapesOutcome) -> None:
    """The job stopped and resumed from its checkpoint with ``new_conf`` (a table more in
    ``table-names``): the resume check's answer (``Pipeline.fits``, as a driver's
    ``pipeline_dir.claim_pipeline_dir`` asks it) first: a refusal fails the check."""
    from seatide.config.loader import load_job_text
    from seatide.plan.dag import build_plan

    then, now = (build_plan(load_job_text(text)).pipelines[0] for text in (runner.conf, new_conf))
    if not now.fits(then.fingerprint()):
        raise AssertionError(f"seed {outcome.seed}: a resume capturing one table more is refused: the checkpoint "
                             "was written for different sources")
    running[0].stop()
    runner.conf = new_conf
    outcome.tables_added += 1
    running[0] = runner.start()


STREAM, CAUGHT_UP = "(the stream)", "running, at the binlog's end"


def stream_state(query, source: Endpoint) -> str:
    """CAUGHT_UP when ``query`` runs without an error and its last batch ended at or past the end of
    ``source``'s binlog now; else where it is."""
    from seatide.connectors.mysql_cdc.catalog import current_position
    from seatide.connectors.mysql_cdc.position import StreamOffset

    if not query.isActive or query.exception() is not None:
        return f"stopped: {str(query.exception() or '')[-300:]}"
    progress = query.lastProgress or {}
    ended = (progress.get("sources") or [{}])[0].get("endOffset")
    at = StreamOffset.from_json(json.loads(ended) if isinstance(ended, str) else ended) if ended else None
    conn = source.connect()
    try:
        end = current_position(conn)
    finally:
        conn.close()
    if at is None or at.position is None or at.phase != "binlog" or at.position < end:
        return f"behind: its last batch ended at {at.position if at else None}, the binlog at {end}"
    return CAUGHT_UP
