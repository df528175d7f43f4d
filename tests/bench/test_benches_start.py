"""Every bench behind a goal of docs/benchmarks.md runs once, small, in the soak set.

The benches stay out of CI (they measure; CI on a shared machine cannot), so nothing else
would notice one that no longer starts: a renamed option, a moved module, a connector
change its hand-written side was not told of. Each case runs the bench's own command with
the smallest sizes that still run both sides, and checks what a reader of its output
relies on: it ended well, it printed SeaTide against the baseline and the machine's load,
and it wrote its results, to a temporary directory (SEATIDE_BENCH_RESULTS), so the
committed results stay the measured ones. The numbers of such a run mean nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# bench file, its short arguments, what its output must name (the baseline side and the
# load), and the results file it writes (None: it prints only).
SHORT_RUNS = {
    "batch_vs_pyspark": (["--rows", "20000", "--rounds", "1"], ("hand-written", "ratio", "load"),
                         "batch_vs_pyspark.json"),
    "warm_submit_batch": (["--rows", "20000", "--rounds", "1", "--out", "{out}/warm_submit_batch"],
                          ("hand-written", "ratio", "load"), "warm_submit_batch.json"),
    "streaming_vs_pyspark": (["--intervals", "1000", "--rate", "500", "--seconds", "6", "--burst-rows", "20000"],
                             ("hand-written", "ratio", "load"), "streaming_vs_pyspark.json"),
    "jdbc_source": (["--rows", "20000", "--rounds", "1", "--max-rows", "10000"], ("plain", "ratio", "load"),
                    "jdbc_source.json"),
    "multi_table snapshot": (["--tables", "3", "--rows", "200", "--rounds", "1"], ("by hand", "load"),
                             "multi_table_snapshot.json"),
    "multi_table cdc": (["--tables", "3", "--rate", "30", "--seconds", "6", "--warmup", "2"], ("p99", "load"),
                        "multi_table_cdc_3.json"),
    "cdc_latency": (["--rate", "30", "--seconds", "6"], ("p99",), None),
    "iceberg_cdc": (["--rate", "30", "--seconds", "6", "--rows", "500"], ("p99", "load"), "iceberg_cdc.json"),
    "failover": (["--stores", "sqlite", "--leader-kills", "1", "--worker-kills", "1", "--worker-stores",
                  "postgresql", "--out", "{out}/failover"], ("leader", "worker"), "failover.json"),
    "stage_and_copy": (["--tables", "2", "--rows", "2000", "--rounds", "1"], ("direct", "baseline", "load"),
                       "stage_and_copy.json"),
    "store_restart": (["--restarts", "1", "--out", "{out}/store_restart"], ("steady", "load"),
                      "store_restart.json"),
}


@pytest.mark.soak
@pytest.mark.parametrize("bench", sorted(SHORT_RUNS))
def test_the_bench_runs_both_sides_and_reports(bench, tmp_path):
    args, names, written = SHORT_RUNS[bench]
    script, *case = bench.split()
    command = [sys.executable, os.path.join(ROOT, "bench", script + ".py"), *case,
               *(a.replace("{out}", str(tmp_path)) for a in args)]
    env = {**os.environ, "SEATIDE_BENCH_RESULTS": str(tmp_path), "PYSPARK_PYTHON": sys.executable}
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    output = run.stdout + run.stderr
    assert run.returncode == 0, f"{' '.join(command)} exited {run.returncode}:\n{output[-4000:]}"
    missing = [name for name in names if name not in output.lower()]
    assert not missing, f"{bench} printed no {missing}:\n{run.stdout[-3000:]}"
    if written is not None:
        with open(tmp_path / written) as handle:
            assert json.load(handle), f"{bench} wrote an empty {written}"
    assert not any(line.startswith("Traceback") for line in output.splitlines()), output[-4000:]
