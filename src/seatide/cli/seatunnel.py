"""``seatide-seatunnel``: SeaTunnel's ``seatunnel.sh`` command line, for scripts that call it.

Cron jobs and CI pipelines written for SeaTunnel keep their flags; each flag is mapped
onto a SeaTide command, so every request still goes through ``seatide.intents``:

  -c CONFIG [-m local]        ``seatide run``: embedded, in the foreground
  -c CONFIG -m cluster        ``seatide submit``, then wait for the job's end (``--async``: don't)
  -r JOBID [-c CONFIG]        ``seatide resume`` (from the latest checkpoint or savepoint)
  -s JOBID / -can JOBID...    ``seatide savepoint`` / ``seatide cancel``, waiting for the stop
  -j JOBID / -l / --metrics   ``seatide status`` / ``seatide list`` / a job's counters, as JSON
  --check -c CONFIG           ``seatide check``
  --encrypt / --decrypt       config encryption (``seatide.config.shade``)

Exit codes are SeaTide's (``cli/args.py``): 0 ok or FINISHED, 1 failed or refused, 2 a bad
config or bad flags, 130 Ctrl-C. See docs/seatunnel-cli.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from types import SimpleNamespace

from seatide.cli.args import EXIT_BAD_CONFIG, EXIT_FAILED, EXIT_OK, CommandRefused, parse_variables, run_command_line
from seatide.config.job_environment import given

# Flags of other seatunnel.sh versions (the Spark and Flink starters) and what to use here.
OTHER_FLAGS = {
    "-t": "--check (SeaTunnel's Spark/Flink starters spelled it -t)",
    "--target": "-m local or -m cluster; Spark's own master is env spark.master in the job file",
    "--run-mode": "-m local or -m cluster",
    "-D": "the job file's env (spark.* keys go to Spark as they are)",
    "--properties": "the job file's env (spark.* keys go to Spark as they are)",
}
MANAGEMENT = (("list", "-l"), ("running_metrics", "--get_running_job_metrics"), ("status", "-j"),
              ("cancel", "-can"), ("metrics", "--metrics"), ("savepoint", "-s"))


class UsageError(CommandRefused):
    def __init__(self, message: str):
        super().__init__(message, EXIT_BAD_CONFIG)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):          # argparse would print usage and exit itself
        raise UsageError(f"{message} (see {self.prog} -h)")


def build_parser(prog: str = "seatide-seatunnel") -> argparse.ArgumentParser:
    p = _Parser(prog=prog, allow_abbrev=False,
                description="SeaTunnel's seatunnel.sh flags, run by SeaTide (docs/seatunnel-cli.md)")
    p.add_argument("-c", "--config", help="the job file")
    p.add_argument("-i", "--variable", dest="variables", action="append", default=[], metavar="NAME=VALUE",
                   help="variable for ${NAME}; several separated by ',' (a ',' inside \"...\" or [...] is kept)")
    p.add_argument("-n", "--name", help="the job's name (default: env job.name)")
    p.add_argument("-m", "--master", help="local (run here, embedded) or cluster (default)")
    p.add_argument("-e", "--deploy-mode", help="local or cluster (as -m); client is accepted and changes nothing")
    p.add_argument("--async", dest="async_", action="store_true",
                   help="cluster: return once the job is submitted (or the stop requested), printing the job id")
    p.add_argument("--check", action="store_true", help="validate the job and print its plan; run nothing")
    p.add_argument("-r", "--restore", metavar="JOBID", help="resume the job from its latest checkpoint or savepoint")
    p.add_argument("-s", "--savepoint", metavar="JOBID", help="stop the job with a savepoint")
    p.add_argument("-can", "--cancel-job", dest="cancel", nargs="+", metavar="JOBID", help="cancel jobs")
    p.add_argument("-j", "--job-id", dest="status", metavar="JOBID", help="print the job's status as JSON")
    p.add_argument("-l", "--list", dest="list", action="store_true", help="print every job as JSON")
    p.add_argument("--metrics", metavar="JOBID", help="print the job's metrics as JSON")
    p.add_argument("--get_running_job_metrics", dest="running_metrics", action="store_true",
                   help="print the metrics of every running job as JSON")
    p.add_argument("-cj", "--close-job", nargs="?", const="true", default="true", choices=["true", "false"],
                   help="cluster: Ctrl-C while waiting cancels the job (true, default) or leaves it running")
    p.add_argument("-cn", "--cluster", default=os.environ.get("SEATIDE_CLUSTER"), metavar="URL",
                   help="the coordinator's URL (or SEATIDE_CLUSTER); SeaTide clusters have no names")
    p.add_argument("--encrypt", action="store_true", help="print the job file with its secrets encrypted")
    p.add_argument("--decrypt", action="store_true", help="print the job file with its secrets decrypted")
    seatide = p.add_argument_group("SeaTide's own")
    seatide.add_argument("--store", default=os.environ.get("SEATIDE_STORE"),
                         help="cluster: the state store URL instead of a coordinator (or SEATIDE_STORE)")
    seatide.add_argument("--api-token-file", default=None, metavar="PATH",
                         help="file holding the coordinator's API token (default: SEATIDE_API_TOKEN)")
    seatide.add_argument("--data-dir", default=None, help="local: the data directory (default ~/.seatide)")
    seatide.add_argument("--strict", action="store_true", help="refuse unknown keys instead of warning")
    seatide.add_argument("--release", action="store_true",
                         help="with -can: cancel and release: drop what the jobs' CDC sources hold on their servers "
                              "(a replication slot) once they have ended; they can then only start fresh")
    return p


def split_variables(values: list[str]) -> list[str]:
    """SeaTunnel's ``-i``: one value may hold several ``name=value`` separated by ``,``; a ``,``
    inside double quotes or brackets belongs to the value, and the quotes stay (HOCON reads them)."""
    pairs: list[str] = []
    for value in values:
        current, quoted, depth = [], False, 0
        for ch in value:
            if ch == '"':
                quoted = not quoted
            elif not quoted and ch in "[]":
                depth += 1 if ch == "[" else -1
            if ch == "," and not quoted and depth <= 0:
                pairs.append("".join(current))
                current = []
            else:
                current.append(ch)
        pairs.append("".join(current))
    return [pair.strip() for pair in pairs if pair.strip()]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return run_command_line("seatide-seatunnel", lambda: _dispatch(_parse(argv)))


def _parse(argv: list[str]) -> argparse.Namespace:
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0].endswith(".sh") else "seatide-seatunnel"
    args, extra = build_parser(prog).parse_known_args(argv)
    for token in extra:
        flag = "-D" if token.startswith("-D") else token.split("=", 1)[0]    # -Dkey=value
        hint = OTHER_FLAGS.get(flag)
        if hint:
            raise UsageError(f"{flag} is not a seatide-seatunnel flag; use {hint}")
        if token.startswith("-"):
            raise UsageError(f"unknown flag {flag} (see {prog} -h for the flags seatunnel.sh has)")
        raise UsageError(f"unexpected argument '{token}': the job file goes after -c")
    args.master = _master(args.master, args.deploy_mode)
    args.variables = split_variables(args.variables)
    return args


def _master(master: str | None, deploy_mode: str | None) -> str:
    """-m and -e name one option in SeaTunnel's engine; -e client (the Spark starter's) is a no-op."""
    for flag, value in (("-m", master), ("-e", deploy_mode)):
        if value not in (None, "local", "cluster") and not (flag == "-e" and value == "client"):
            hint = ("SeaTide takes Spark's master from the job file's env spark.master"
                    if flag == "-m" else "SeaTide's Spark drivers always run in client mode")
            raise UsageError(f"{flag} {value} is not supported: use -m local (run here) or -m cluster "
                             f"(a SeaTide cluster); {hint}")
    modes = {v for v in (master, deploy_mode) if v in ("local", "cluster")}
    if len(modes) > 1:
        raise UsageError(f"-m {master} and -e {deploy_mode} disagree; give one")
    return modes.pop() if modes else "cluster"


def _dispatch(args) -> int:
    given = [flag for dest, flag in MANAGEMENT if getattr(args, dest)]
    if args.encrypt or args.decrypt:
        return _shade(args)
    if args.release and not args.cancel:
        raise UsageError("--release goes with -can: -can JOBID --release cancels the job and releases what its "
                         "CDC sources hold")
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)} are separate commands; give one at a time")
    if given:
        if args.config or args.restore:
            raise UsageError(f"{given[0]} takes no {'-c' if args.config else '-r'}; give one command at a time")
        return _manage(args, given[0])
    if args.check:
        if not args.config:
            raise UsageError("--check needs the job file: --check -c JOB.conf")
        from seatide.cli.check import check_job
        return check_job(args.config, parse_variables(args.variables), strict=args.strict)
    if args.config or args.restore:
        return _start(args)
    raise UsageError("nothing to do: -c JOB.conf runs a job; -l, -j, -s, -can, -r, --metrics manage jobs")


def _start(args) -> int:
    """-c runs a job, -r resumes one: here (local) or on the cluster, waiting unless --async."""
    if args.restore and args.name:
        print(f"seatide-seatunnel: warning: -n is ignored with -r: job {args.restore} keeps its name",
              file=sys.stderr)
    if args.master == "local":
        if args.async_:
            raise UsageError("--async needs -m cluster: a local job lives and ends with this process")
        return _start_local(args)
    from seatide.cli.client import resume_job, submit_job
    from seatide.cli.follow import follow_job

    client = _cluster_client(args)
    variables = parse_variables(args.variables)
    if args.restore:
        job_id = resume_job(client, args.restore, path=args.config, variables=variables or None,
                            strict=args.strict)
    else:
        job_id = submit_job(client, args.config, variables, name=args.name, strict=args.strict)
    if args.async_:
        print(job_id)
        return EXIT_OK
    return follow_job(client, job_id, args.config or f"resume of {args.restore}",
                      cancel_on_interrupt=args.close_job == "true")


def _start_local(args) -> int:
    from seatide.cli.run import resume_command, run_command

    common = SimpleNamespace(config=args.config, variables=args.variables, data_dir=args.data_dir,
                             strict=args.strict)
    if args.restore:
        return resume_command(SimpleNamespace(**vars(common), job_id=args.restore, savepoint=None, fallback=None))
    return run_command(SimpleNamespace(**vars(common), job_id=None, job_name=args.name))


def _cluster_client(args):
    """-m local manages the jobs of the local data directory; cluster, those of --cluster/--store."""
    from seatide.cli.client import open_client

    if args.master == "local":
        return open_client(None, None, args.data_dir)
    if args.cluster and not args.cluster.startswith(("http://", "https://")):
        raise UsageError(f"-cn {args.cluster}: SeaTide clusters have no names; give a coordinator's URL "
                         "(-cn http://host:8080, or SEATIDE_CLUSTER) or the store (--store URL, or SEATIDE_STORE)")
    return open_client(args.cluster, args.store, args.data_dir, args.api_token_file)


def _manage(args, flag: str) -> int:
    from seatide.cli import follow

    client = _cluster_client(args)
    if flag == "-l":
        from seatide.cli.client import all_jobs, not_shown
        rows, missing = all_jobs(client)
        _print_json(rows)       # the jobs read: a list that failed is named on stderr, and in the exit
        return not_shown(missing)
    if flag == "-j":
        return _print_json(client.call("GET", f"/job-info/{args.status}"))
    if flag == "--metrics":
        return _print_json(follow.job_metrics(client.call("GET", f"/job-info/{args.metrics}")))
    if flag == "--get_running_job_metrics":
        return _print_json([follow.job_metrics(client.call("GET", f"/job-info/{row['jobId']}"))
                            for row in client.call("GET", "/running-jobs")])
    if flag == "-s":
        return follow.stop_jobs(client, [args.savepoint], savepoint=True, wait=not args.async_)
    return follow.stop_jobs(client, args.cancel, savepoint=False, wait=not args.async_, release=args.release)


def _print_json(value) -> int:
    print(json.dumps(value, indent=2))
    return EXIT_OK


def _shade(args) -> int:
    """--encrypt / --decrypt -c FILE: print the job, in SeaTunnel's JSON form (a job file SeaTide
    runs as it is), with the options its ``shade.identifier`` covers encrypted or in clear.
    When both flags are given, --encrypt wins, as in SeaTunnel."""
    if not args.config:
        raise UsageError(f"{'--encrypt' if args.encrypt else '--decrypt'} needs the job file: -c JOB.conf")
    from seatide.cli.args import read_job_file
    from seatide.config.job import ConfigError, where
    from seatide.config.loader import job_as_json

    try:   # config encryption lives in seatide.config.shade; this is its one use here
        from seatide.config.shade import ShadeError, decrypt_config, encrypt_config
    except ImportError:
        raise CommandRefused("config encryption (seatide.config.shade) is not in this build of SeaTide",
                             EXIT_FAILED) from None
    try:
        tree = job_as_json(read_job_file(args.config), given(parse_variables(args.variables)), args.config)
        shaded = (encrypt_config if args.encrypt else decrypt_config)(tree)
    except ConfigError as exc:
        raise CommandRefused(str(exc), EXIT_BAD_CONFIG) from None
    except ShadeError as exc:
        raise CommandRefused(f"{exc}\n  {where(args.config)}", EXIT_BAD_CONFIG) from None
    print(json.dumps(shaded, indent=2, ensure_ascii=False))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
