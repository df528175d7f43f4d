"""``/system-monitoring-information``: the serving coordinator's host and process, in SeaTunnel's keys.

SeaTunnel reports each Hazelcast member's JVM. A SeaTide coordinator is a Python process:
"heap" is its resident memory, "gc" Python's collector (generation 0 as minor, 2 as
major, no time measured), and Hazelcast's queues and connections, which SeaTide does not
have, are "0". docs/compatibility.md lists each.
"""

from __future__ import annotations

import gc
import threading

import psutil

_PEAK_THREADS = 0
_HAZELCAST_COUNTERS = (
    "event.q.size", "executor.q.async.size", "executor.q.client.size", "executor.q.client.query.size",
    "executor.q.client.blocking.size", "executor.q.query.size", "executor.q.scheduled.size", "executor.q.io.size",
    "executor.q.system.size", "executor.q.operations.size", "executor.q.priorityOperation.size",
    "operations.completed.count", "executor.q.mapLoad.size", "executor.q.mapLoadAllKeys.size",
    "executor.q.cluster.size", "executor.q.response.size", "operations.running.count",
    "operations.pending.invocations.count", "proxy.count", "clientEndpoint.count", "connection.active.count",
    "client.connection.count", "connection.count")


def _size(n: float) -> str:
    for unit in ("B", "K", "M", "G"):
        if n < 1024 or unit == "G":
            return f"{n:.1f}{unit}" if unit != "B" else f"{int(n)}"
        n /= 1024
    raise AssertionError("unreachable")


def system_monitoring() -> list[dict[str, str]]:
    global _PEAK_THREADS
    process = psutil.Process()
    memory, swap = psutil.virtual_memory(), psutil.swap_memory()
    rss = process.memory_info().rss
    threads = threading.active_count()
    _PEAK_THREADS = max(_PEAK_THREADS, threads)
    collections = gc.get_stats()
    info = {
        "processors": str(psutil.cpu_count() or 1),
        "physical.memory.total": _size(memory.total),
        "physical.memory.free": _size(memory.available),
        "swap.space.total": _size(swap.total),
        "swap.space.free": _size(swap.free),
        "heap.memory.used": _size(rss),
        "heap.memory.free": "0",
        "heap.memory.total": _size(rss),
        "heap.memory.max": _size(memory.total),
        "heap.memory.used/total": "100.00%",
        "heap.memory.used/max": f"{rss * 100 / memory.total:.2f}%",
        "minor.gc.count": str(collections[0]["collections"]),
        "minor.gc.time": "0ms",
        "major.gc.count": str(collections[-1]["collections"]),
        "major.gc.time": "0ms",
        "load.process": f"{process.cpu_percent(interval=None):.2f}%",
        "load.system": f"{psutil.cpu_percent(interval=None):.2f}%",
        "load.systemAverage": f"{psutil.getloadavg()[0]:.2f}",
        "thread.count": str(threads),
        "thread.peakCount": str(_PEAK_THREADS),
        "cluster.timeDiff": "0",
        "operations.pending.invocations.percentage": "0.00%",
    }
    info.update({key: "0" for key in _HAZELCAST_COUNTERS})
    return [info]
