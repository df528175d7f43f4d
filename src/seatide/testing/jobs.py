"""Job files used by the fault tests, and a reader for what their sinks wrote."""

from __future__ import annotations

import json
import os
from collections import Counter

# Three rows to the console: a valid job for tests about the control plane, not its rows.
CONSOLE_JOB = """
env { job.mode = BATCH }
source { FakeSource { row.num = 3, schema = { fields { id = bigint } } } }
sink { Console {} }
"""


def batch_job(out: str, rows: int = 100, pipelines: int = 1, rows_per_batch: int | None = None,
              retries: int = 3, name: str = "batch", env_extra: tuple[str, ...] = ()) -> str:
    """FakeSource -> LocalFile (JSON) per pipeline; ids of pipeline p are p*rows .. p*rows+rows-1."""
    env = [f'job.name = "{name}"', "job.mode = BATCH", f"job.retry.times = {retries}",
           "job.retry.interval.seconds = 1", *env_extra]
    if rows_per_batch:
        env += ["checkpoint.interval = 1000", f"micro-batch.max-rows = {rows_per_batch}"]
    sources, transforms = [], []
    for p in range(pipelines):
        sources.append(f"""
  FakeSource {{
    plugin_output = "fake{p}"
    row.num = {rows}
    split.num = 4
    sequence.field = "seq"
    schema = {{ fields {{ seq = bigint, name = string }} }}
  }}""")
        transforms.append(f"""
  Sql {{ plugin_input = "fake{p}", plugin_output = "t{p}", query = "select seq + {p * rows} as id, name from fake{p}" }}""")
    sink_blocks = [f"""
  LocalFile {{ plugin_input = "t{p}", path = "{out}/p{p}", file_format_type = "json" }}""" for p in range(pipelines)]
    return ("env {\n  " + "\n  ".join(env) + "\n}\nsource {" + "".join(sources) + "\n}\ntransform {"
            + "".join(transforms) + "\n}\nsink {" + "".join(sink_blocks) + "\n}\n")


def streaming_job(out: str, splits: int = 2000, rows_per_split: int = 10, interval_ms: int = 1000,
                  read_interval_ms: int = 300, retries: int = 3, name: str = "stream", pipelines: int = 1) -> str:
    """A stream that keeps producing for splits * read_interval_ms, checkpointing every interval_ms.
    ``pipelines`` > 1: that many source -> sink chains, pipeline p (from 1) writing ``<out>/p<p>``."""
    def source(output: str) -> str:
        return f"""
  FakeSource {{{output}
    row.num = {splits * rows_per_split}
    split.num = {splits}
    split.read-interval = {read_interval_ms}
    sequence.field = "id"
    schema = {{ fields {{ id = bigint, name = string }} }}
  }}"""

    if pipelines == 1:
        sources, sinks = source(""), f"""
  LocalFile {{ path = "{out}", file_format_type = "json" }}"""
    else:
        chains = range(1, pipelines + 1)
        sources = "".join(source(f'\n    plugin_output = "s{p}"') for p in chains)
        sinks = "".join(f"""
  LocalFile {{ plugin_input = "s{p}", path = "{out}/p{p}", file_format_type = "json" }}""" for p in chains)
    return f"""
env {{
  job.name = "{name}"
  job.mode = STREAMING
  checkpoint.interval = {interval_ms}
  job.retry.times = {retries}
  job.retry.interval.seconds = 1
}}
source {{{sources}
}}
sink {{{sinks}
}}
"""


def written_ids(path: str) -> Counter:
    """Every id in the JSON files under ``path``, ignoring hidden staging/commit directories."""
    ids: Counter = Counter()
    if not os.path.isdir(path):
        return ids
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        for name in files:
            if name.startswith((".", "_")) or not name.endswith(".json"):
                continue
            with open(os.path.join(root, name)) as handle:
                for line in handle:
                    if line.strip():
                        ids[json.loads(line)["id"]] += 1
    return ids


def assert_exactly(ids: Counter, expected: range) -> None:
    duplicates = {i: n for i, n in ids.items() if n > 1}
    missing = set(expected) - set(ids)
    extra = set(ids) - set(expected)
    assert not duplicates, f"duplicated ids: {sorted(duplicates.items())[:10]}"
    assert not missing, f"{len(missing)} missing ids, e.g. {sorted(missing)[:10]}"
    assert not extra, f"unexpected ids: {sorted(extra)[:10]}"


def committed_rows(data_dir: str, job_id: str) -> int:
    """Rows a local run's job has committed so far, read from its embedded store (0 before it exists)."""
    from seatide.store.address import default_store_url
    from seatide.store.db import open_store
    from seatide.store.views import job_info

    store = open_store(default_store_url(data_dir))
    try:
        with store.read() as conn:
            info = job_info(conn, job_id)
        return info["metrics"]["SinkWriteCount"] if info else 0
    finally:
        store.dispose()
