"""Outside review 2 (promise 4: ordinary batches not made slow by many tables). Every writer's hold
(``recreate.hold_for_writing``, each batch, each table with rows) lists the whole database directory
(``_set_aside_of``), which holds four entries per table (the table, its lock, turnstile and holders):
a batch over N tables reads O(N^2) entries. Measured (local disk): 500 tables 1.7 s, 2000 tables 20 s,
5000 tables 118 s of holds per batch. Counted here deterministically: the directory entries one
batch's holds read, over N tables, grow with N per table."""

from __future__ import annotations

import os

from seatide.connectors.paimon import recreate


def _entries_read_by_one_batch(tmp_path, tables: int, monkeypatch) -> int:
    db = tmp_path / f"w{tables}" / "db.db"
    paths = [str(db / f"t{i}") for i in range(tables)]
    for p in paths:
        os.makedirs(os.path.join(p, "schema"))
        recreate.hold_for_writing(p, "db.t", "a writer").release()     # the first batch made its lock files
    read = []
    real = os.listdir

    def counted(path="."):
        found = real(path)
        read.append(len(found))
        return found

    monkeypatch.setattr(os, "listdir", counted)
    for p in paths:                     # one batch writing every table
        recreate.hold_for_writing(p, "db.t", "a writer").release()
    monkeypatch.setattr(os, "listdir", real)
    return sum(read)


def test_a_batch_over_many_tables_reads_entries_linear_in_tables(tmp_path, monkeypatch):
    small, large = _entries_read_by_one_batch(tmp_path, 50, monkeypatch), _entries_read_by_one_batch(tmp_path, 500,
                                                                                                      monkeypatch)
    print(f"entries read by one batch's holds: 50 tables {small}, 500 tables {large}")
    assert large <= 10 * small * 2, (f"one batch's holds read {small} directory entries over 50 tables, {large} over "
                                     "500: quadratic in the tables of the database")
