"""``seatide check JOB.conf``: validate a job and show what would run, without running it.

The same validation as a submission (``intents.check``), then the plan a driver would
execute (``plan.dag.build_plan``): each pipeline's sources, transforms and sinks with
their file lines and links, the job's mode and checkpointing, and the lenient load's
warnings. Nothing is written: no data directory, no store, no SparkSession.
"""

from __future__ import annotations

import json
import sys

from seatide.cli.args import EXIT_BAD_CONFIG, EXIT_OK, parse_variables, read_job_file


def check_command(args) -> int:
    return check_job(args.config, parse_variables(args.variables), strict=args.strict, as_json=args.json)


def check_job(path: str, variables: dict[str, str], *, strict: bool = False, as_json: bool = False) -> int:
    from seatide import intents
    from seatide.plan.dag import build_plan

    try:
        config = intents.check(read_job_file(path), variables, source=path, strict=strict)
    except intents.Refusal as exc:
        print(f"seatide: invalid job: {exc}", file=sys.stderr)
        if as_json:
            print(json.dumps({"valid": False, "source": path, "error": str(exc)}, indent=2))
        return EXIT_BAD_CONFIG
    report = plan_report(build_plan(config))
    print(json.dumps(report, indent=2) if as_json else render(report))
    return EXIT_OK


def plan_report(plan) -> dict:
    """The plan as plain data: what ``--json`` prints and what the text is rendered from."""
    job, env = plan.job, plan.job.env
    return {
        "valid": True,
        "source": job.source_name,
        "jobName": env.name,
        "mode": env.mode,
        "parallelism": env.parallelism,
        "checkpoint": {"enabled": env.micro_batch,
                       "intervalMs": env.trigger_interval_ms if env.micro_batch else None,
                       "timeoutMs": env.checkpoint_timeout_ms,
                       # only bounded (BATCH) micro-batches are cut by rows
                       "microBatchMaxRows": None if env.streaming or not env.micro_batch
                       else env.micro_batch_max_rows},
        "pipelines": [{
            "pipelineId": p.pipeline_id,
            "fingerprint": p.fingerprint(),
            **{kind: [_plugin(spec, p.inputs) for spec in specs]
               for kind, specs in (("sources", p.sources), ("transforms", p.transforms), ("sinks", p.sinks))},
        } for p in plan.pipelines],
        "warnings": [str(w) for w in job.warnings],
    }


def _plugin(spec, inputs: dict[str, list[str]]) -> dict:
    return {"id": spec.plugin_id, "plugin": spec.name, "label": spec.label, "line": spec.line,
            "output": spec.output, "reads": inputs.get(spec.plugin_id, [])}


def render(report: dict) -> str:
    """The report for a person: one line per plugin, grouped by pipeline, in run order."""
    pipelines = report["pipelines"]
    lines = [f"{report['source']}: valid",
             f"  job {report['jobName']!r}: {report['mode']}, parallelism {report['parallelism']}, "
             f"{_checkpointing(report)}",
             f"  {len(pipelines)} pipeline{'s' if len(pipelines) != 1 else ''} "
             "(each its own Spark query: it finishes, fails and restores on its own)"]
    labels = {spec["id"]: spec["label"] for p in pipelines for k in ("sources", "transforms", "sinks")
              for spec in p[k]}
    for p in pipelines:
        lines.append(f"pipeline {p['pipelineId']} (sources fingerprint {p['fingerprint']})")
        for kind in ("sources", "transforms", "sinks"):
            for spec in p[kind]:
                where = f"line {spec['line']}" if spec["line"] else "line ?"
                reads = ", ".join(labels[i] for i in spec["reads"])
                line = f"  {spec['label']:<32} {where:<9}" + (f" <- {reads}" if reads else "")
                lines.append(line.rstrip())
    if report["warnings"]:
        lines.append(f"{len(report['warnings'])} warning{'s' if len(report['warnings']) != 1 else ''} "
                     "(ignored keys; --strict makes them errors):")
        lines += ["  " + w.replace("\n", "\n  ") for w in report["warnings"]]     # reason, then where
    return "\n".join(lines)


def _checkpointing(report: dict) -> str:
    ckpt = report["checkpoint"]
    if not ckpt["enabled"]:
        return "no checkpointing (each pipeline runs as one plain Spark job; a retry starts it over)"
    text = f"a checkpoint every {ckpt['intervalMs']} ms"
    if ckpt["microBatchMaxRows"]:
        text += f" (bounded micro-batches of at most {ckpt['microBatchMaxRows']:,} rows, resumable)"
    return text
