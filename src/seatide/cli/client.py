"""``seatide submit|list|status|cancel|savepoint``: talk to a cluster, or straight to a store."""

from __future__ import annotations

import json
import os
import sys

from seatide.cli.args import (EXIT_BAD_CONFIG, EXIT_FAILED, EXIT_OK, CommandRefused as Refused, default_data_dir,
                              parse_variables, print_config_warnings, read_job_file)
from seatide.cli.http_client import Answered, HttpClient
from seatide.config.job_text import captured_environment

# The routes a submit and a resume are sent to: a coordinator from before recorded environments has neither (it
# answers 405, 404), so it is never sent a job it would read ${NAME}s into from its own environment (``_sent``).
SUBMIT = "/jobs"
RESUME = "/incarnations"


class StoreClient:
    """The same calls, answered from the store directly (no coordinator needed to read or ask)."""

    def __init__(self, url: str, data_dir: str):
        from seatide.store.db import open_store

        self.store = open_store(url)
        self.data_dir = data_dir

    def call(self, method: str, path: str, body: dict | None = None):
        from seatide import intents
        from seatide.store.states import JOB_TERMINAL
        from seatide.store.checkpoint_views import checkpoint_report
        from seatide.store.views import job_info, job_rows, overview

        try:
            if method == "POST" and path == SUBMIT:
                accepted = intents.submit(self.store, self.data_dir, text=body["config"],
                                          variables=body.get("variables"), source=body.get("source") or "job",
                                          job_id=body.get("jobId"), name=body.get("jobName"),
                                          strict=bool(body.get("strict")), actor="cli",
                                          environment=body.get("environment"))
                return {"jobId": accepted.job_id, "warnings": accepted.warnings}
            if path.endswith(RESUME):
                accepted = intents.resume(self.store, path.split("/")[2], text=body.get("config"),
                                          variables=body.get("variables"), source=body.get("source"),
                                          strict=bool(body.get("strict")), savepoint_id=body.get("fromSavepoint"),
                                          fallback=body.get("fallback"), actor="cli",
                                          environment=body.get("environment"))
                return {"jobId": accepted.job_id, "warnings": accepted.warnings}
            if path.endswith("/left-behind/dismiss"):
                return {"dismissed": intents.dismiss_left(self.store, path.split("/")[2], body["holds"], actor="cli")}
            if path == "/stop-job":
                intents.stop(self.store, body["jobId"], savepoint=body.get("isStopWithSavePoint", False),
                             release=bool(body.get("release")), actor="cli")
                return {"jobId": body["jobId"]}
            with self.store.read() as conn:
                if path == "/overview":
                    return overview(conn)
                if path.startswith("/job-info/"):
                    info = job_info(conn, path.rsplit("/", 1)[1])
                    if info is None:
                        raise Refused(f"no job with id {path.rsplit('/', 1)[1]}")
                    return info
                if path == "/jobs":
                    return job_rows(conn)
                if path.endswith("/checkpoints"):
                    report = checkpoint_report(conn, path.split("/")[2], int(body.get("limit", 100)) if body else 100)
                    if report is None:
                        raise Refused(f"no job with id {path.split('/')[2]}")
                    return report
                if path == "/running-jobs":
                    return job_rows(conn, exclude=set(JOB_TERMINAL))
        except intents.LeaderAwaited as exc:
            raise Refused(self._leader_awaited(exc), EXIT_FAILED) from None
        except intents.Refusal as exc:
            raise Refused(str(exc), EXIT_BAD_CONFIG if exc.kind is intents.RefusalKind.BAD_REQUEST
                          else EXIT_FAILED) from None
        raise Refused(f"unsupported call {method} {path}")

    def _leader_awaited(self, exc) -> str:
        """Written straight to the store, no coordinator of this version is at hand to be elected: say where."""
        from seatide.store.address import redact

        return (f"{exc.why} This command wrote to the store {redact(self.store.url)} directly (no --cluster), and no "
                f"coordinator of this version has been elected on it yet. Start one on this store (`seatide cluster "
                f"coordinator` with the same --store or --data-dir; it is elected once that lease expires), then "
                f"ask again, here or through it with --cluster URL; or, for a data directory used by `seatide run` "
                f"alone, use `seatide run` (docs/operations.md, Upgrading)")


def open_client(cluster: str | None, store: str | None, data_dir: str | None, token_file: str | None = None):
    """A coordinator's REST API if ``cluster`` is given (with the API token of ``token_file`` or
    SEATIDE_API_TOKEN), else the store (default: the data directory's)."""
    from seatide.store.address import default_store_url
    from seatide.store.db import StoreUnavailable

    if cluster:
        from seatide.api.auth import TokenError, load_token
        try:
            return HttpClient(cluster, load_token(token_file))
        except TokenError as exc:
            raise Refused(str(exc)) from None
    data_dir = os.path.abspath(data_dir or default_data_dir())
    try:
        return StoreClient(store or default_store_url(data_dir), data_dir)
    except StoreUnavailable as exc:
        raise Refused(str(exc)) from None


def client_command(args) -> int:
    try:
        client = open_client(args.cluster, args.store, args.data_dir, args.api_token_file)
        return _COMMANDS[args.command](client, args)
    except Refused as exc:
        print(f"seatide: {exc}", file=sys.stderr)
        return exc.code


def submit_job(client, path: str, variables: dict[str, str], *, job_id: str | None = None,
               name: str | None = None, strict: bool = False) -> str:
    """Submit the job file at ``path`` with what its ``${NAME}``s fall back to in this shell's environment
    (``config/job_environment.py``); print its config warnings; return the job id."""
    text = read_job_file(path)
    result = _sent(client, SUBMIT, {"config": text, "jobId": job_id, "jobName": name, "variables": variables,
                                    "source": path, "strict": strict,
                                    "environment": captured_environment(text, variables)}, "submitted")
    print_config_warnings(result.get("warnings") or [])
    return result["jobId"]


def resume_job(client, job_id: str, *, path: str | None = None, variables: dict[str, str] | None = None,
               savepoint_id: int | None = None, fallback: str | None = None, strict: bool = False) -> str:
    """Resume a job, with a changed job file at ``path`` if given, and then with what its ``${NAME}``s fall back
    to in this shell's environment (without one, the job keeps the environment recorded with it); print config
    warnings."""
    body = {"fromSavepoint": savepoint_id, "fallback": fallback, "variables": variables, "strict": strict}
    if path:
        body["source"] = path
        body["config"] = read_job_file(path)
        body["environment"] = captured_environment(body["config"], variables)
    result = _sent(client, f"/jobs/{job_id}{RESUME}", body, "resumed")
    print_config_warnings(result.get("warnings") or [])
    return result["jobId"]


def _sent(client, path: str, body: dict, what: str) -> dict:
    """POST ``body`` to ``path``, a route only coordinators that record environments serve. One without it is
    older than this command: it ignores ``environment`` and would fill the job's ${NAME}s from its own (or, on a
    resume with new variables, store them without the mark: every process then reads its own). Refused, with
    nothing done: the route's absence is the answer, no check before and no undo after."""
    try:
        return client.call("POST", path, body)
    except Answered as exc:
        if not exc.unserved:
            raise
        raise Refused(f"the coordinator at {client.base} is older than this seatide command: it answered "
                      f"POST /api/v1{path} with {exc.status} ({exc}), a route of the versions that record the "
                      f"environment a job's ${{NAME}}s fall back to; an older one would fill them from its own "
                      f"environment. Nothing was {what}. Upgrade every coordinator of the cluster to this version "
                      "of SeaTide (docs/operations.md, Upgrading), or use the seatide command of the coordinator's "
                      "version", EXIT_FAILED) from None


def all_jobs(client) -> tuple[list[dict], list[str]]:
    """Every job the cluster or store knows, running and finished, and what of them could not be read.

    One read (``GET /jobs``): the running and the finished lists, read one after the other, missed a job resumed
    between the two (review 7, F2). A coordinator without it (404: an older version, during a rolling upgrade)
    is asked the lists (``_jobs_of_two_lists``). A failure of the one read is raised: nothing was read."""
    try:
        return client.call("GET", "/jobs"), []
    except Answered as exc:
        if exc.status != 404:
            raise
    return _jobs_of_two_lists(client)


# An older coordinator's lists: the running list is read again at the end, so a job that moved from one list to
# the other between the reads is in one of them (ended between the first two: in the finished list; resumed
# between the last two: in the second running list). What a failed read may have left out, when one failed.
_TWO_LISTS = (("/running-jobs", "a job that ended while the lists were read may not be shown"),
              ("/finished-jobs/all", "the finished jobs are not shown"),
              ("/running-jobs", "a job resumed while the lists were read may not be shown"))


def _jobs_of_two_lists(client) -> tuple[list[dict], list[str]]:
    """``all_jobs`` of a coordinator without ``GET /jobs``: the jobs read, each once as the last read that has it
    shows it, oldest first; a line for each read that failed (review 6, F1: the jobs read are shown). Every read
    failed: the first failure is raised (an unreachable cluster, a refused token: one clear message)."""
    rows, failed = [], {}
    for at, (path, left_out) in enumerate(_TWO_LISTS):
        try:
            rows += client.call("GET", path)
        except Exception as exc:  # noqa: BLE001 - any failure (a dropped connection too): the other lists are shown
            failed[at] = exc
    if len(failed) == len(_TWO_LISTS):
        first = failed[0]
        raise first if isinstance(first, Refused) else Refused(f"GET {_TWO_LISTS[0][0]} failed: {first}")
    if 0 in failed and 2 in failed:      # the running list read neither time (the finished list was)
        missing = [f"the running jobs are not shown (GET /running-jobs failed): {failed[0]}"]
    else:
        missing = [f"{_TWO_LISTS[at][1]} (GET {_TWO_LISTS[at][0]} failed): {exc}" for at, exc in failed.items()]
    last = {row["jobId"]: row for row in rows}
    return sorted(last.values(), key=lambda row: row.get("createTime") or ""), missing


def not_shown(missing: list[str]) -> int:
    """Say on stderr (stdout may be a script's JSON) each part of an answer not read; the exit code."""
    for line in missing:
        print(f"seatide: {line}", file=sys.stderr)
    return EXIT_FAILED if missing else EXIT_OK


def _submit(client, args) -> int:
    print(submit_job(client, args.config, parse_variables(args.variables), job_id=args.job_id,
                     name=args.job_name, strict=args.strict))
    return EXIT_OK


def _list(client, args) -> int:
    rows, missing = all_jobs(client)
    if args.json:       # the jobs, as ever (scripts read this array); what releases left: the overview's leftBehind
        print(json.dumps(rows, indent=2))
        return not_shown(missing)
    print(f"{'JOB ID':<22}{'STATUS':<16}{'CREATED':<21}NAME")
    for row in rows:
        print(f"{row['jobId']:<22}{row['jobStatus']:<16}{row['createTime'] or '':<21}{row['jobName']}")
    try:        # what releases left, a forgotten job's too (review F2); the jobs are listed whatever its answer
        for left in client.call("GET", "/overview").get("leftBehind") or []:
            print(left_line(left, job=True))
    except Exception as exc:  # noqa: BLE001 - any failure of this part: the jobs are out, and the exit says it
        missing.append(f"what releases left on the sources' servers is not shown: {exc}")
    return not_shown(missing)


def _dismiss_left(client, args) -> int:
    client.call("POST", f"/jobs/{args.job_id}/left-behind/dismiss", {"holds": args.slot})
    print(f"{args.slot}, left by job {args.job_id}'s release, is no longer shown")
    return EXIT_OK


def _status(client, args) -> int:
    info = client.call("GET", f"/job-info/{args.job_id}")
    if args.json:
        print(json.dumps(info, indent=2))
        return EXIT_OK
    ckpt = info["checkpoint"]
    print(f"Job {info['jobId']} ({info['jobName']}): {info['jobStatus']}")
    print(f"  created {info['createTime']}  finished {info['finishedTime'] or '-'}  retries {info['retriesUsed']}")
    print(f"  rows read {info['metrics']['SourceReceivedCount']:,}  written {info['metrics']['SinkWriteCount']:,}")
    print(f"  checkpoints {ckpt['completed']} (last #{ckpt['lastCheckpointId'] or '-'}, "
          f"{ckpt['secondsSinceLastCheckpoint'] if ckpt['secondsSinceLastCheckpoint'] is not None else '-'} s ago)"
          f"  health {ckpt['health'] or '-'}")
    for p in info["pipelines"]:
        waiting = f"  ({p['waiting']})" if p.get("waiting") else ""
        print(f"  pipeline {p['pipelineId']}: {p['status']}  read {p['rowsRead']:,}  written {p['rowsWritten']:,}{waiting}")
    for line in retained_lines(info):
        print(f"  {line}")
    if info["errorMsg"]:
        print(f"  error: {info['errorMsg']}")
    return EXIT_OK


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def left_line(left: dict, job: bool = False) -> str:
    """A slot a release left, no run's to drop (``leftBehind``), with how to settle it: ``status`` and ``list``."""
    whose = f"job {left['jobId']}'s release" if job else "the release"
    measured = f" (last measurement failed: {left['error']})" if left.get("error") else ""
    return (f"LEFT on the {left['connector']} server by {whose} ({left['time']}, run {left.get('run') or '-'}): "
            f"{left['holds']} retaining {human_bytes(left['retainedBytes'])} ({left['state'] or '-'}){measured}: "
            f"{left['why']} To settle it: {left['settle']}")


def retained_lines(info: dict) -> list[str]:
    """What the job's CDC sources hold on their servers, and its release, for ``status``."""
    lines = []
    for r in info.get("retained") or []:
        what = "slot" if r["connector"] == "Postgres-CDC" else "binlog position"
        size = human_bytes(r["retainedBytes"])
        verb = "retains" if r["connector"] == "Postgres-CDC" else "behind by"
        pipeline = f"pipeline {r['pipelineId']}" + (", left out by the current config" if r.get("leftOut") else "")
        line = (f"{r['source']} {r['connector']} ({pipeline}): {what} {r['holds'] or '-'} {verb} {size}"
                f" ({r['state'] or '-'}), measured {r['measuredTime'] or '-'}")
        if r["lost"]:
            line += "  LOST: the server no longer has what resuming needs"
        if r["warning"]:
            line += f"  WARNING: over the threshold since {r['warningSince']}"
        if r["error"]:
            line += f"  (last measurement failed: {r['error']})"
        lines.append(line)
    lines += [left_line(left) for left in info.get("leftBehind") or []]
    release = info.get("release")
    if release:
        done = release["state"] == "RELEASED"
        lines.append(f"sources {'released ' + (release['time'] or '') if done else 'release ' + release['state']}: "
                     f"it can only start fresh (seatide resume {info['jobId']} --fallback fresh)")
    elif info.get("retainedWarning"):
        lines.append(f"to free the server: resume the job, or seatide cancel {info['jobId']} --release")
    return lines


def _stop(client, args, savepoint: bool) -> int:
    release = bool(getattr(args, "release", False))
    body = {"jobId": args.job_id, "isStopWithSavePoint": savepoint}
    if release:
        body["release"] = True
    client.call("POST", "/stop-job", body)
    if release:
        print(f"cancel and release requested for job {args.job_id}: once it has ended, what its sources hold "
              f"(a replication slot) is dropped, and it can then only start fresh (seatide resume {args.job_id} "
              "--fallback fresh)")
    else:
        print(f"{'savepoint' if savepoint else 'cancel'} requested for job {args.job_id}")
    return EXIT_OK


def _resume(client, args) -> int:
    job_id = resume_job(client, args.job_id, path=args.config,
                        variables=parse_variables(args.variables) if args.variables else None,
                        savepoint_id=args.savepoint, fallback=args.fallback, strict=args.strict)
    print(f"job {job_id} resumed")
    return EXIT_OK


def _checkpoints(client, args) -> int:
    path = f"/jobs/{args.job_id}/checkpoints"
    report = client.call("GET", path + (f"?limit={args.limit}" if isinstance(client, HttpClient) else ""),
                         None if isinstance(client, HttpClient) else {"limit": args.limit})
    if args.json:
        print(json.dumps(report, indent=2))
        return EXIT_OK
    age = report["secondsSinceLastCheckpoint"]
    print(f"Job {report['jobId']}: {report['jobStatus']}  health {report['health'] or '-'}")
    print(f"  checkpoints: {report['completed']} completed, {report['failed']} failed, {report['restored']} restored;"
          f" last #{report['lastCheckpointId'] or '-'} {'' if age is None else f'{age} s ago'}")
    for p in report["pipelines"]:
        latest = p["latest"] or {}
        print(f"  pipeline {p['pipelineId']} {p['status']}{' (idle)' if p['idle'] else ''}: "
              f"{p['completed']} completed, {p['failed']} failed, last batch {latest.get('batchId', '-')}")
    print(f"  {'ID':>6} {'KIND':<11}{'STATUS':<10}{'PIPELINE':>8} {'BATCH':>6} {'ROWS':>10} {'MS':>7}  TIME")
    for c in report["history"]:
        print(f"  {c['checkpointId']:>6} {c['kind']:<11}{c['status']:<10}{c['pipelineId']:>8} {c['batchId']:>6} "
              f"{c['rows']:>10} {c['durationMs']:>7}  {c['time']}")
        if c.get("unrestorable"):       # listed, yet `resume --from` it is refused: say why before one tries
            print(f"  {'':>6} cannot be restored: {c['unrestorable']}")
    return EXIT_OK


_COMMANDS = {
    "submit": _submit, "list": _list, "status": _status, "job-info": _status,
    "cancel": lambda c, a: _stop(c, a, False), "savepoint": lambda c, a: _stop(c, a, True),
    "resume": _resume, "checkpoints": _checkpoints, "dismiss-left": _dismiss_left,
}
