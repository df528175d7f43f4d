"""A job's outline: its env options and its DAG as SeaTunnel's REST API shows them.

Made once when the job is recorded (submit, resume) and stored with it (``jobs.outline``),
because reading it back from the config text means parsing it again (35-50 ms a job with
pyhocon, the reader of the time; under 1 ms with SeaTide's own since): a thousand running jobs
listed by SeaTunnel's ``GET /running-jobs`` after a coordinator start took most of a minute. Jobs recorded before the column existed are parsed on first read and
kept in a bounded cache (``stored_outline``).
"""

from __future__ import annotations

import json
from functools import lru_cache

from seatide.config.job import ConfigError, JobConfig, PluginSpec
from seatide.config.loader import load_job_outline
from seatide.plan.dag import outline_pipelines
from seatide.config.job_text import flatten

_KIND_TITLE = {"source": "Source", "transform": "Transform", "sink": "Sink"}


def outline_json(config: JobConfig) -> str:
    """What ``jobs.outline`` stores for a validated job."""
    return json.dumps(job_outline(config.env_block, config.plugins))


def stored_outline(config_text: str, variables: str, outline: str | None) -> tuple[dict, dict]:
    """(env options, DAG without its job id) of a stored job: its outline, else its config parsed."""
    if outline:
        stored = json.loads(outline)
        return stored["env"], stored["dag"]
    return _parsed(config_text, variables)


@lru_cache(maxsize=4096)
def _parsed(config_text: str, variables: str) -> tuple[dict, dict]:
    """By the config text and variables (a resume with another config is another text).
    Shared between callers: never change what it returns."""
    try:
        env_block, specs = load_job_outline(config_text, json.loads(variables or "{}"), source_name="a stored job")
    except (ConfigError, ValueError):      # validated at submit; unreadable now only if SeaTide changed
        env_block, specs = {}, []
    outline = job_outline(env_block, specs)
    return outline["env"], outline["dag"]


def job_outline(env_block: dict, specs: list[PluginSpec]) -> dict:
    """The env options (dotted keys) and the DAG: plugins as vertices (numbered in file
    order) and each pipeline's edges."""
    env = {key: value for key, value in flatten(env_block).items() if not isinstance(value, dict)}
    vertex = {spec.plugin_id: number for number, spec in enumerate(specs, start=1)}
    try:
        pipelines = outline_pipelines(specs)
    except ConfigError:
        pipelines = []
    dag = {
        # A list on the page (an object at the top level): the env options one entry each.
        "envOptions": [{key: value} for key, value in env.items()],
        "vertexInfoMap": [{"vertexId": vertex[spec.plugin_id], "type": spec.kind,
                           "vertexName": f"{_KIND_TITLE[spec.kind]}[{spec.index}]-{spec.name}",
                           "tablePaths": _table_paths(spec)} for spec in specs],
        "pipelineEdges": {str(p.pipeline_id): [{"inputVertexId": vertex[up], "targetVertexId": vertex[target]}
                                               for target, ups in p.inputs.items() for up in ups]
                          for p in pipelines},
    }
    return {"env": env, "dag": dag}


def _table_paths(spec) -> list[str]:
    written = [spec.block.get(key) for key in ("table_path", "table", "path")]
    named = [str(t) for t in written if isinstance(t, str) and t]
    if named:
        return named
    return list(spec.inputs) if spec.kind == "sink" else [spec.output] if spec.output else []
