"""What the Python zygote imports for its children, and when (runtime/zygote_imports.py).

A forked child should find done what it would import after its fork (a SeaTide data source's
modules and database clients; pandas in a ``pyspark.worker``), with the zygote's objects frozen
for the garbage collector: Spark's daemon has each reused worker collect after every task, and a
collection that walked the zygote's imports cost 20-60 ms of CPU a task."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from seatide import failpoints
from seatide.runtime import python_zygote, zygote_imports
from seatide.testing.cluster import wait_for
from tests.runtime.test_python_zygote import SPARK_WORKER_ENV, FakeJvm, zygote  # noqa: F401  (zygote is a fixture)

SRC = Path(zygote_imports.__file__).resolve().parents[2]


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")


def test_every_python_data_source_of_seatide_is_imported_before_the_first_fork():
    defining = set()
    for path in (SRC / "seatide").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(getattr(b, "id", None) == "DataSource" for b in node.bases):
                defining.add(_module_name(path))
    assert "seatide.connectors.fake.split_stream" in defining
    assert defining - set(zygote_imports.BEFORE_ANY_FORK) == set()


def _reads_environment_at_import(path: Path) -> bool:
    """Whether the module's own top-level code (not its functions' bodies) touches os.environ."""
    def walk(node) -> bool:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                pending = [*getattr(child, "decorator_list", []), *child.args.defaults, *child.args.kw_defaults]
                if any(d is not None and walk_one(d) for d in pending):
                    return True
            elif walk_one(child):
                return True
        return False

    def walk_one(node) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb")) or walk(node)

    return walk(ast.parse(path.read_text()))


def test_seatides_modules_the_zygote_imports_read_at_import_only_the_environment_it_checks():
    """A forked child sees what the zygote's imports read from the zygote's environment: each such
    variable is one a request must match (else its client starts the interpreter afresh)."""
    listed = subprocess.run(
        [sys.executable, "-c", "import sys, json\nfrom seatide.runtime import zygote_imports as z\n"
         "z.import_all(z.BEFORE_ANY_FORK)\nprint(json.dumps([m.__file__ for n, m in sys.modules.items()"
         " if n.startswith('seatide') and getattr(m, '__file__', None)]))"],
        capture_output=True, text=True, timeout=120, check=True)
    files = [Path(f) for f in json.loads(listed.stdout)]
    assert any(f.name == "split_stream.py" for f in files)
    reading = {_module_name(f) for f in files if _reads_environment_at_import(f)}
    assert reading == {"seatide.failpoints"}, "add what they read to zygote_imports.IMPORT_TIME_ENV"
    assert failpoints.POINTS_ENV in python_zygote.IMPORT_TIME_ENV


def test_the_zygotes_imports_set_off_no_collection_and_leave_the_collector_on_with_them_frozen():
    """Collections during the imports freed under 1% of what they walked, for 8% of the imports' CPU."""
    code = ("import gc, json\nfrom seatide.runtime import zygote_imports as z\n"
            "before = sum(s['collections'] for s in gc.get_stats())\n"
            "z.import_all(('pyspark.sql.streaming.python_streaming_source_runner', 'pandas'))\n"
            "print(json.dumps([sum(s['collections'] for s in gc.get_stats()) - before, gc.isenabled(),"
            " gc.get_freeze_count()]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    collections, enabled, frozen = json.loads(done.stdout)
    assert (collections, enabled) == (1, True)     # the one run on purpose before the freeze
    assert frozen > 50_000


def test_what_the_imports_left_unreachable_is_freed_not_frozen_into_the_children():
    code = ("import gc, json\nfrom seatide.runtime import zygote_imports as z\n"
            "z.import_all(('pyspark.sql.streaming.python_streaming_source_runner', 'pandas'))\n"
            "gc.unfreeze()\nprint(json.dumps(gc.collect()))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(done.stdout) < 50       # ~870 (dead classes, cycles) when frozen without a collection


def test_each_forked_process_draws_its_own_numpy_random_numbers_as_a_fresh_one_would():
    """numpy seeds its global generator at import and never at a fork: imported in the zygote, two
    workers forked by one daemon would draw the same surrogate keys or samples (review of the zygote's
    imports, F1)."""
    code = ("import os, sys\nfrom seatide.runtime import zygote_imports as z\nz.import_all(('pandas',))\n"
            "import numpy\nfor _ in range(2):\n"
            "    if os.fork() == 0:\n"
            "        if os.fork() == 0:\n"            # a daemon's worker: a fork of a fork
            "            print(numpy.random.random(), flush=True); os._exit(0)\n"
            "        os.wait(); print(numpy.random.random(), flush=True); os._exit(0)\n"
            "    os.wait()\n"
            "print(numpy.random.random())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    drawn = done.stdout.split()
    assert len(drawn) == 5 and len(set(drawn)) == 5, drawn


def _has_pandas(pid: int) -> bool:
    with open(f"/proc/{pid}/maps") as maps:
        return "/pandas/_libs/" in maps.read()


def test_the_zygote_imports_pandas_only_before_forking_a_daemon_of_pyspark_worker(zygote, tmp_path):  # noqa: F811
    """pandas costs each zygote 0.25 s: only a daemon of ``pyspark.worker`` has workers that
    import it (a runner, or a planning daemon's workers, never does)."""
    jvm = FakeJvm(tmp_path)
    client = jvm.start_runner(zygote.client, str(tmp_path))
    conn, runner_pid = jvm.accept_runner()
    assert psutil.Process(runner_pid).ppid() == zygote.process.pid
    assert not _has_pandas(zygote.process.pid)
    conn.close()
    client.communicate(timeout=60)
    daemon = subprocess.Popen([zygote.client, "-m", "pyspark.daemon", "pyspark.worker"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, cwd=str(tmp_path), env={**os.environ, **SPARK_WORKER_ENV})
    try:
        assert len(daemon.stdout.read(4)) == 4      # the daemon's port: it was forked and listens
        assert _has_pandas(zygote.process.pid)
        assert any(_has_pandas(c.pid) for c in psutil.Process(zygote.process.pid).children())
    finally:
        daemon.stdin.close()                        # the JVM's way to end a daemon
        daemon.wait(timeout=60)


@pytest.mark.spark
def test_the_sessions_python_workers_start_with_the_zygotes_imports_done_and_frozen(spark):
    """A UDF runs in a worker forked by the daemon the zygote forked: it finds a SeaTide source's
    modules, the database clients and pandas imported, and the zygote's objects frozen, so the
    collection the daemon runs after each task skips them."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    zygote = python_zygote.started()
    wait_for(lambda: os.path.exists(os.path.join(os.path.dirname(zygote.client), "zygote.sock")), 60,
             message="the zygote accepting")

    def state(_):
        import gc
        import sys

        wanted = ("seatide.connectors.jdbc.split_reader", "psycopg", "pymysql", "pandas")
        return json.dumps({"frozen": gc.get_freeze_count(), "collected": len(gc.get_objects()),
                           "missing": [m for m in wanted if m not in sys.modules]})

    (row,) = spark.range(1).select(F.udf(state, StringType())("id")).collect()
    seen = json.loads(row[0])
    assert seen["missing"] == [], seen
    assert seen["frozen"] > 10_000, seen       # PySpark alone leaves ~40,000 objects
    assert seen["collected"] < seen["frozen"], seen     # what a collection walks: the worker's own
