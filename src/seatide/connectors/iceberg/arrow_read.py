"""Reading an Iceberg table's parquet data files in Spark's Python workers (micro-batch reads).

Columns are found by name (the table's name mapping: SeaTide's files carry no field ids);
a column a file lacks (added to the table after the file was written) reads as NULL.
"""

from __future__ import annotations

from typing import Iterator

_BATCH_ROWS = 65_536


def read_files(paths: list[str], struct) -> Iterator:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema

    from seatide.connectors.iceberg.datafiles import local_path

    target = to_arrow_schema(struct)
    for path in paths:
        handle = pq.ParquetFile(local_path(path))
        names = {n.lower(): n for n in handle.schema_arrow.names}
        present = [names[f.name.lower()] for f in target if f.name.lower() in names]
        for batch in handle.iter_batches(batch_size=_BATCH_ROWS, columns=present):
            columns = []
            for field in target:
                source = names.get(field.name.lower())
                if source is None:
                    columns.append(pa.nulls(batch.num_rows, field.type))
                else:
                    columns.append(batch.column(source).cast(field.type))
            yield pa.RecordBatch.from_arrays(columns, schema=target)
