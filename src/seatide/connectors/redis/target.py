"""One Redis database as a sink's target: each micro-batch written in one transaction, once.

The batch's commands and its record (field ``<batch id>`` of the hash
``seatide:commits:<run>``, ``<run>`` being the batch's transaction id without its number) go
in one MULTI/EXEC, under WATCH of the record: a replay, a roll-forward or a zombie that finds the
record writes nothing, and two writers of one batch cannot both commit it (the second's EXEC
fails on the watched record, and it then finds the record). The attempt's fence is checked right
before EXEC. So a list (RPUSH, which is not idempotent) gets each row once as well.

Keys of hash, list, set or zset data types are watched too, and their types checked first: a key
that holds another type would fail its command inside EXEC, where Redis goes on with the rest.
"""

from __future__ import annotations

import logging

from seatide import failpoints
from seatide.connectors.json_rows import rows_as_json
from seatide.connectors.redis.commands import REMOVING, Command, queue
from seatide.connectors.redis.options import RedisError, connect
from seatide.connectors.redis.scan import REDIS_TYPES
from seatide.plugin.base import Batch, PermanentError
from seatide.plugin.rowkind import ROW_SEQ_COLUMN
from seatide.plugin.sink_protocol import Target, TargetRows
from seatide.plugin.tables import TableRoute

log = logging.getLogger(__name__)

RECORDS_KEPT = 100      # a run's records of its last batches: a replay is of the batch after the last committed
ATTEMPTS = 20           # EXECs refused because another writer changed a watched key


def record_key(batch: Batch) -> str:
    number = str(batch.batch_id)
    run = batch.transaction_id
    if run.endswith(number):
        run = run[:-len(number)].rstrip("_-")
    return f"seatide:commits:{run}"


class RedisTarget(Target):
    def __init__(self, key: str, routes: list[TableRoute]):
        super().__init__(key, routes)
        self.opts = routes[0].sink.opts
        self._client = None

    def client(self):
        if self._client is None:
            self._client = connect(self.opts)
        return self._client

    def ensure(self, schema) -> None:
        self.client()           # fail at the first batch, naming the server, when it cannot be reached

    def apply(self, rows: TargetRows, batch: Batch) -> dict:
        import redis

        commands = self._commands(rows)
        record, field = record_key(batch), str(batch.batch_id)
        typed = sorted({c.key for c in commands if c.data_type != "key"})
        total = int(batch.previous_state.get("total_rows", 0))
        client = self.client()
        for _ in range(ATTEMPTS):
            with client.pipeline(transaction=True) as pipe:
                try:
                    pipe.watch(record, *typed)
                    done = pipe.hget(record, field)
                    if done is not None:        # written by an earlier attempt (or a zombie that won)
                        return {"rows": int(done), "total_rows": total + int(done), "replayed": True}
                    self._check_types(client, commands, typed)
                    batch.fence()
                    pipe.multi()
                    for command in commands:
                        queue(pipe, command)
                    pipe.hset(record, field, len(commands))
                    pipe.hdel(record, str(batch.batch_id - RECORDS_KEPT))
                    pipe.execute()
                    failpoints.hit("redis.applied")     # written and recorded; the commit log not yet
                    return {"rows": len(commands), "total_rows": total + len(commands)}
                except redis.WatchError:
                    continue
                except redis.RedisError as exc:
                    raise RedisError(f"Redis sink: batch {batch.batch_id} could not be written to "
                                     f"{self.opts['host']}:{self.opts['port']} (db {self.opts['db_num']}): "
                                     f"{exc}") from None
        raise RedisError(f"Redis sink: batch {batch.batch_id}: other clients changed its keys ({', '.join(map(repr, typed[:5]))}"
                         f"{', ...' if len(typed) > 5 else ''}) {ATTEMPTS} times while it was written")

    def _commands(self, rows: TargetRows) -> list[Command]:
        """Every route's rows as commands, in ``__row_seq`` order when the rows carry it."""
        frames = [rows_as_json(part.frame, part.route.sink.opts["key"], i) for i, part in enumerate(rows.parts)]
        if not frames:
            return []
        df = frames[0]
        for other in frames[1:]:
            df = df.unionByName(other)
        # A change stream's rows are put in the order they changed; others keep the input's order.
        sequenced = any(ROW_SEQ_COLUMN in part.frame.columns for part in rows.parts)
        ordered = df.orderBy("seq", "route") if sequenced else df
        commands = []
        for row in ordered.toLocalIterator():
            route = rows.parts[row["route"]].route
            if row["key"] is None:
                raise PermanentError(f"Redis sink: a row of {route.name or 'the input'} has a null "
                                     f"{route.sink.opts['key']}, the field its key is taken from")
            # each table's own options: routes into one server share a target, not their options
            commands.append(Command(route.sink.opts["data_type"], row["kind"] in REMOVING,
                                    row["key"].encode("utf-8"), row["value"], int(route.sink.opts["expire"])))
        return commands

    @staticmethod
    def _check_types(client, commands: list[Command], typed: list[bytes]) -> None:
        """After the WATCH: a change to any of these keys from now on fails the EXEC, so their types
        are asked in one round trip of a plain pipeline (a batch may write thousands of keys)."""
        wanted = {c.key: c.data_type for c in commands if c.data_type != "key"}
        with client.pipeline(transaction=False) as types:
            for key in typed:
                types.type(key)
            held_types = types.execute()
        for key, held in zip(typed, held_types):
            if held not in (b"none", REDIS_TYPES[wanted[key]]):
                raise PermanentError(f"Redis sink: key {key.decode('utf-8', 'replace')!r} holds a "
                                     f"{held.decode()}, and data_type = {wanted[key]} writes a "
                                     f"{REDIS_TYPES[wanted[key]].decode()}; remove the key or choose another key")

    def end_of_data(self, state: dict) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


__all__ = ["RedisTarget", "record_key"]
