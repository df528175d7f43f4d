"""The leader's look at what releases left on the sources' servers (``left_held``, store/left_held.py).

A slot.name a release could not tell is SeaTide's is left, retaining WAL, and shown to the operator
with how to settle it, whatever became of the run and its job row. It is settled on the server (the
operator drops it, or a resume of the job that reads it claims it: its own release drops it), never
in SeaTide: so the leader asks the source that left it, from the config stored with the row, what it
holds now (``Source.still_left``) each time it measures the jobs' sources (coordinator/source_watch.py),
updates the figures, and drops the row, with a RELEASE_LEFT_SETTLED event, once it is gone. A source
that cannot be asked keeps the row, with why (masked): never a row dropped on a guess. Only the source
of that config (the one its release was loaded from, review 2 F2) that names the slot is asked; a row with
no config (told by an event alone: store/left_held.py ``adopt``) is the operator's to dismiss.
"""

from __future__ import annotations

import json
import logging

from sqlalchemy import select

from seatide.coordinator.source_release import sources_of
from seatide.secrets import mask_message, secret_values
from seatide.store import schema as s
from seatide.store.db import Store, record_event
from seatide.store.left_held import DISMISS, UNASKABLE, adopt, left_held_rows, remeasured, settled, told_only

log = logging.getLogger(__name__)


def look_at_left_held(store: Store, epoch: int, actor: str, timeout_s: float) -> int:
    """One look at every row, each written fenced by ``epoch``; the number found settled. Events no row stands
    for are made rows first (review 2 F1)."""
    with store.read() as conn:
        rows, told = left_held_rows(conn), told_only(conn)
    if told:
        with store.leader_tx(epoch) as conn:
            log.warning("%d slots releases left, told by events alone, are kept to be shown", adopt(conn))
            rows = left_held_rows(conn)
    gone = 0
    for row in rows:
        held, error = _ask(row, timeout_s)
        with store.leader_tx(epoch) as conn:
            if conn.execute(select(s.left_held.c.id).where(s.left_held.c.id == row.id)).first() is None:
                continue        # settled meanwhile (a former leader's look)
            if error is not None:
                remeasured(conn, row.id, error=error)
            elif held is None:
                settled(conn, row.id)
                record_event(conn, "RELEASE_LEFT_SETTLED", actor, row.job_id, row.incarnation, epoch,
                             run_id=row.run_id, source=row.plugin_id, connector=row.connector, holds=row.holds)
                shown = mask_message(row.holds, secret_values(row.config, json.loads(row.variables or "{}")))
                log.info("job %s run %s: %s, which its release left, is gone or a run's now", row.job_id,
                         row.run_id, shown)
                gone += 1
            else:
                remeasured(conn, row.id, held)
    return gone


def _ask(row, timeout_s: float):
    """(what the slot holds now, None) or (None, why it could not be told, masked)."""
    if row.config is None:
        return None, UNASKABLE
    secrets = secret_values(row.config, json.loads(row.variables or "{}"))
    try:
        specs = [spec for spec in sources_of(row.job_id, row.config, row.variables)
                 if spec.plugin_id == row.plugin_id and spec.name == row.connector
                 and row.holds in spec.plugin.shared_names()]
        if not specs:
            return None, (f"the config that left it names no {row.connector} source {row.plugin_id} with slot "
                          f"{row.holds} any more: {DISMISS}")
        return specs[0].plugin.still_left(row.holds, timeout_s), None
    except NotImplementedError:
        return None, f"{row.connector} cannot tell whether it is still held: {DISMISS}"
    except Exception as exc:  # noqa: BLE001 - a server down, a config this version cannot load: shown, kept
        return None, mask_message(f"{type(exc).__name__}: {exc}".strip(), secrets)[:1000]


__all__ = ["look_at_left_held"]
