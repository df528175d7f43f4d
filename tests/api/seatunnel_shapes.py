"""The answers of SeaTunnel's REST API v2 as its page (seatunnel-engine/rest-api-v2.md) shows them:
each field's JSON type, so tests can hold SeaTide's answers to the page field by field."""

from __future__ import annotations

from typing import Any

NULL_OR_STR = (type(None), str)

VERTEX = {"vertexId": int, "type": str, "vertexName": str, "tablePaths": [str]}
JOB_DAG = {"jobId": str, "envOptions": list, "vertexInfoMap": [VERTEX], "pipelineEdges": dict}
METRICS = {"sourceReceivedCount": str, "sinkWriteCount": str}

OVERVIEW = {key: str for key in ("projectVersion", "gitCommitAbbrev", "totalSlot", "unassignedSlot", "works",
                                 "runningJobs", "finishedJobs", "failedJobs", "cancelledJobs")}
RUNNING_JOB = {"jobId": str, "jobName": str, "jobStatus": str, "envOptions": dict, "createTime": str,
               "jobDag": JOB_DAG, "pluginJarsUrls": list, "isStartWithSavePoint": bool, "metrics": METRICS}
JOB_INFO_ALWAYS = {"jobId": str, "jobName": str, "jobStatus": str, "createTime": str, "jobDag": JOB_DAG,
                   "metrics": METRICS}
JOB_INFO_RUNNING = {**JOB_INFO_ALWAYS, "envOptions": dict, "pluginJarsUrls": list, "isStartWithSavePoint": bool}
JOB_INFO_FINISHED = {**JOB_INFO_ALWAYS, "finishedTime": str, "errorMsg": NULL_OR_STR}
FINISHED_JOB = {"jobId": str, "jobName": str, "jobStatus": str, "errorMsg": NULL_OR_STR, "createTime": str,
                "finishTime": str, "jobDag": JOB_DAG, "metrics": str}
SUBMITTED = {"jobId": int, "jobName": str}
SUBMITTED_EACH = {"jobId": str, "jobName": str}
STOPPED = {"jobId": int}
LOG_ENTRY = {"node": str, "logLink": str, "logName": str}
MONITORING_KEYS = (
    "processors", "physical.memory.total", "physical.memory.free", "swap.space.total", "swap.space.free",
    "heap.memory.used", "heap.memory.free", "heap.memory.total", "heap.memory.max", "heap.memory.used/total",
    "heap.memory.used/max", "minor.gc.count", "minor.gc.time", "major.gc.count", "major.gc.time", "load.process",
    "load.system", "load.systemAverage", "thread.count", "thread.peakCount", "cluster.timeDiff", "event.q.size",
    "executor.q.async.size", "executor.q.client.size", "executor.q.client.query.size",
    "executor.q.client.blocking.size", "executor.q.query.size", "executor.q.scheduled.size", "executor.q.io.size",
    "executor.q.system.size", "executor.q.operations.size", "executor.q.priorityOperation.size",
    "operations.completed.count", "executor.q.mapLoad.size", "executor.q.mapLoadAllKeys.size",
    "executor.q.cluster.size", "executor.q.response.size", "operations.running.count",
    "operations.pending.invocations.percentage", "operations.pending.invocations.count", "proxy.count",
    "clientEndpoint.count", "connection.active.count", "client.connection.count", "connection.count")
MONITORING = {key: str for key in MONITORING_KEYS}


def check_shape(value: Any, shape: Any, where: str = "answer") -> None:
    """Assert that ``value`` has exactly the fields of ``shape``, each of its JSON type."""
    if isinstance(shape, dict):
        assert isinstance(value, dict), f"{where}: expected an object, got {value!r}"
        assert set(value) == set(shape), f"{where}: fields {sorted(value)} != {sorted(shape)}"
        for key, inner in shape.items():
            check_shape(value[key], inner, f"{where}.{key}")
    elif isinstance(shape, list):
        assert isinstance(value, list), f"{where}: expected a list, got {value!r}"
        for i, item in enumerate(value):
            check_shape(item, shape[0], f"{where}[{i}]")
    else:
        ok = isinstance(value, shape) and not (shape is int and isinstance(value, bool))
        assert ok, f"{where}: {value!r} is not {shape}"
