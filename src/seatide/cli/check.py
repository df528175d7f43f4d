"""``seatide check JOB.conf``: validate a job and show what would run, without running it.

The same validation as a submission (``intents.check``), then the plan a driver would
execute (``plan.dag.build_plan``): each pipeline's sources, transforms and sinks with
their file lines and links, the job's mode and checkpointing, and the lenient load's
warnings. Nothing is written: no data directory, no store, no SparkSession.

``--connect`` also asks each sink's own server which privileges the job needs that its user
lacks (``Sink.lacking``): a privilege the job cannot run without fails the check (exit 1), one it
runs without in another way (more slowly) is a note.
"""

from __future__ import annotations

import json
import os
import sys

from seatide.config.local_paths import path_notes
from seatide.cli.args import EXIT_BAD_CONFIG, EXIT_FAILED, EXIT_OK, parse_variables, read_job_file


def check_command(args) -> int:
    return check_job(args.config, parse_variables(args.variables), strict=args.strict, as_json=args.json,
                     connect=args.connect)


def check_job(path: str, variables: dict[str, str], *, strict: bool = False, as_json: bool = False,
              connect: bool = False) -> int:
    from seatide import intents
    from seatide.plan.dag import build_plan

    from seatide.secrets import mask_tree, secret_values

    text = read_job_file(path)
    try:
        config = intents.check(text, variables, source=path, strict=strict)
    except intents.Refusal as exc:
        print(f"seatide: invalid job: {exc}", file=sys.stderr)
        if as_json:
            print(json.dumps({"valid": False, "source": path, "error": str(exc)}, indent=2))
        return EXIT_BAD_CONFIG
    plan = build_plan(config)
    report = plan_report(plan)
    if connect:
        report["privileges"] = privileges_report(plan)
    # Shown as every view shows a job: a name or an output made of a secret variable, a server's error quoting
    # what its sink connected with (review 9, F10).
    report = mask_tree(report, secret_values(text, variables))
    print(json.dumps(report, indent=2) if as_json else render(report))
    refused = any(p.get("required", True) for p in report.get("privileges", []))
    return EXIT_FAILED if refused else EXIT_OK


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
        # relative sink paths: where `seatide run` started here writes them, and that submit refuses them
        "notes": path_notes(job, os.getcwd()),
    }


def privileges_report(plan) -> list[dict]:
    """What each sink's server says its user lacks: {"sink", "privilege", "why", "required"}, or
    {"sink", "error"} when it could not be asked."""
    found = []
    for pipeline in plan.pipelines:
        behaviours = [s.plugin.schema_change_behavior() for s in pipeline.sources]
        behaviour = next((b for b in behaviours if b is not None), None)
        for spec in pipeline.sinks:
            try:
                lacking = spec.plugin.lacking(behaviour)
            except Exception as exc:  # noqa: BLE001 - the server's or the network's word, reported as is
                found.append({"sink": spec.label, "error": (str(exc).strip().splitlines() or [type(exc).__name__])[0]})
                continue
            found += [{"sink": spec.label, "privilege": one.privilege, "why": one.why, "required": one.required}
                      for one in lacking]
    return found


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
    if "privileges" in report:
        lines += _privileges(report["privileges"])
    lines += [f"note: {note}" for note in report["notes"]]
    if report["warnings"]:
        lines.append(f"{len(report['warnings'])} warning{'s' if len(report['warnings']) != 1 else ''} "
                     "(ignored keys; --strict makes them errors):")
        lines += ["  " + w.replace("\n", "\n  ") for w in report["warnings"]]     # reason, then where
    return "\n".join(lines)


def _privileges(found: list[dict]) -> list[str]:
    if not found:
        return ["privileges: every sink's user has what the job needs"]
    lines = ["privileges (asked of each sink's server):"]
    for one in found:
        if "error" in one:
            lines.append(f"  {one['sink']}: could not ask its server: {one['error']}")
        elif one["required"]:
            lines.append(f"  {one['sink']}: its user lacks {one['privilege']}, which the job needs: it {one['why']}")
        else:
            lines.append(f"  {one['sink']}: its user lacks {one['privilege']} (not needed; the sink {one['why']})")
    return lines


def _checkpointing(report: dict) -> str:
    ckpt = report["checkpoint"]
    if not ckpt["enabled"]:
        return "no checkpointing (each pipeline runs as one plain Spark job; a retry starts it over)"
    text = f"a checkpoint every {ckpt['intervalMs']} ms"
    if ckpt["microBatchMaxRows"]:
        text += f" (bounded micro-batches of at most {ckpt['microBatchMaxRows']:,} rows, resumable)"
    return text
