"""A batch's Paimon commit, made once whoever makes it.

Every snapshot names the commit user and the commit identifier that made it. SeaTide's commit
user for a sink is its transaction prefix (``T_<run>_<pipeline>_<sink>_<lineage>_``: no other
run, sink or lineage shares it, every attempt of this one does) and the identifier is the batch's
id. Staging records the table's newest snapshot then (``base``): the batch's commit, if made,
is a later snapshot, so the publish looks at the snapshots after ``base`` for one of this user
and identifier before committing, and commits nothing when it finds one. Two publishers racing
(a zombie that decided in time and its replacement) both miss it, and both commit: the second's
snapshot file is taken, it retries, and pypaimon's own check of the snapshots since its first try
finds the first's commit of the same user and identifier and stops. Messages travel in the
decision as Paimon's own serialized commit messages (Java's v14 form), base64.
"""

from __future__ import annotations

import base64
import re

from seatide.connectors.paimon.warehouse import PaimonError


def commit_user(transaction_id: str, batch_id: int) -> str:
    """The sink's commit user: its transaction id without the batch's number."""
    suffix = str(batch_id)
    return transaction_id[:-len(suffix)] if transaction_id.endswith(suffix) else transaction_id


def of_job(user, own: str | None) -> bool:
    """Whether commit user ``user`` is one of the job whose users begin ``own`` (``T_<job>_``): exactly
    ``T_<job>_<pipeline>_<sink>_<lineage>_`` (``runtime.sink_runs``; a lineage has no '_'). Job ids
    may hold '_': job ``orders_2``'s users begin with job ``orders``'s ``T_orders_`` too, and a prefix
    alone took them for its own (outside review 2, H2)."""
    user = str(user)
    return bool(own) and user.startswith(own) and _OWN_REST.fullmatch(user[len(own):]) is not None


_OWN_REST = re.compile(r"\d+_\d+_[^_]+_")       # <pipeline>_<sink>_<lineage>_ after T_<job>_


def latest_id(table) -> int:
    snapshot = table.snapshot_manager().get_latest_snapshot()
    return snapshot.id if snapshot is not None else 0


def encode(table, messages) -> list[str]:
    from pypaimon.write.commit_message_serializer import serialize_commit_message

    return [base64.b64encode(serialize_commit_message(m, table.partition_keys_fields)).decode("ascii")
            for m in messages if not m.is_empty()]


def decode(table, texts: list[str]) -> list:
    from pypaimon.utils.file_store_path_factory import canonical_data_file_path
    from pypaimon.write.commit_message_serializer import deserialize_commit_message

    messages = []
    for text in texts:
        message = deserialize_commit_message(base64.b64decode(text), table.partition_keys_fields,
                                             table.trimmed_primary_keys_fields)
        for file in message.new_files + message.changelog_files + message.deleted_files:
            file.file_path = canonical_data_file_path(table, message.partition, message.bucket, file.file_name)
        messages.append(message)
    return messages


def committed(table, user: str, identifier: int, after: int) -> int | None:
    """The snapshot after snapshot ``after`` made by ``user`` with ``identifier``, or None."""
    manager = table.snapshot_manager()
    latest = latest_id(table)
    for snapshot_id in range(latest, after, -1):
        snapshot = manager.get_snapshot_by_id(snapshot_id)
        if snapshot is None:
            raise PaimonError(f"Paimon sink: snapshot {snapshot_id} of {table.identifier} has expired since batch "
                              f"{identifier} was staged on snapshot {after}, so whether it was committed cannot be "
                              "known; keep more snapshots (snapshot.num-retained.min) than commits happen between "
                              "two batches")
        if snapshot.commit_user == user and snapshot.commit_identifier == identifier:
            return snapshot_id
    return None


def newest_of(table, user: str) -> tuple[int | None, int]:
    """The commit identifier of ``user``'s newest snapshot still kept (None: none kept), and the oldest
    snapshot looked at: every snapshot from it to the newest was kept (an expired one ends the look)."""
    manager = table.snapshot_manager()
    oldest = latest_id(table) + 1
    for snapshot_id in range(oldest - 1, 0, -1):
        snapshot = manager.get_snapshot_by_id(snapshot_id)
        if snapshot is None:
            break           # expired, and every older one with it
        oldest = snapshot_id
        if snapshot.commit_user == user:
            return snapshot.commit_identifier, oldest
    return None, oldest


def commit_once(table, user: str, identifier: int, after: int, messages: list) -> bool:
    """Commit ``messages`` as ``user``'s commit ``identifier`` unless a snapshot after ``after``
    holds it; True when this call committed."""
    from pypaimon.write.table_commit import StreamTableCommit

    if not messages or committed(table, user, identifier, after) is not None:
        return False
    commit = StreamTableCommit(table, user)
    try:
        commit.commit(messages, identifier)
    finally:
        commit.close()
    return True


__all__ = ["commit_once", "commit_user", "committed", "decode", "encode", "latest_id", "newest_of", "of_job"]
