"""``seatide``: run jobs locally, run a cluster, talk to one.

Exit codes: 0 the job FINISHED (or the request succeeded), 1 the job FAILED or a
request was refused, 2 a bad config or bad arguments, 130 stopped with Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from seatide.cli.args import run_command_line


def _add_store_args(parser: argparse.ArgumentParser, cluster: bool = True) -> None:
    if cluster:
        parser.add_argument("--cluster", default=os.environ.get("SEATIDE_CLUSTER"),
                            help="coordinator URL (or SEATIDE_CLUSTER), e.g. http://127.0.0.1:8080")
        _add_token_arg(parser)
    parser.add_argument("--store", default=os.environ.get("SEATIDE_STORE"),
                        help="state store URL (or SEATIDE_STORE): sqlite:///path or postgresql://...")
    parser.add_argument("--data-dir", default=None, help="data directory (default ~/.seatide or SEATIDE_DATA_DIR)")


def _add_token_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api-token-file", default=None, metavar="PATH",
                        help="file holding the coordinator's API token (default: SEATIDE_API_TOKEN); "
                             "see docs/security.md")


def _add_strict_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--strict", action="store_true",
                        help="refuse the job if it has keys no option declares (default: warn and ignore them)")


def _warm_drivers(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = -1
    if count < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of drivers: pass 0 or more (0 disables the pool)")
    return count


def _size(text: str) -> int:
    from seatide.coordinator.source_watch import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def version_line() -> str:
    """``seatide X.Y.Z (PySpark a.b.c, Python x.y.z)``, from the installed packages' metadata
    (PySpark is not imported: that would cost seconds)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    def of(package: str) -> str:
        try:
            return version(package)
        except PackageNotFoundError:
            return "not installed"

    return f"seatide {of('seatide')} (PySpark {of('pyspark')}, Python {platform.python_version()})"


class _VersionAction(argparse.Action):
    """``--version`` computed only when asked for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the versions of SeaTide, PySpark and Python, and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="seatide", description="SeaTunnel-style data integration on Spark")
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True)

    check = sub.add_parser("check", help="validate a job and print its DAG and pipelines, without running it")
    check.add_argument("config")
    check.add_argument("-i", dest="variables", action="append", metavar="NAME=VALUE")
    check.add_argument("--json", action="store_true", help="print the plan as JSON")
    check.add_argument("--connect", action="store_true",
                       help="also ask each sink's server which privileges the job needs that its user lacks")
    _add_strict_arg(check)

    run = sub.add_parser("run", help="run a job here and wait for its end")
    run.add_argument("config")
    run.add_argument("-i", dest="variables", action="append", metavar="NAME=VALUE")
    run.add_argument("--job-id")
    run.add_argument("--job-name", help="the job's name (default: env job.name)")
    run.add_argument("--data-dir", default=None)
    _add_strict_arg(run)

    submit = sub.add_parser("submit", help="submit a job to a cluster")
    submit.add_argument("config")
    submit.add_argument("-i", dest="variables", action="append", metavar="NAME=VALUE")
    submit.add_argument("--job-id")
    submit.add_argument("--job-name")
    _add_strict_arg(submit)
    _add_store_args(submit)

    for name, help_text in (("list", "list jobs"), ("status", "show a job"), ("job-info", "show a job (as status)"),
                            ("cancel", "cancel a job"), ("savepoint", "stop a job with a savepoint")):
        cmd = sub.add_parser(name, help=help_text)
        if name != "list":
            cmd.add_argument("job_id")
        if name == "cancel":
            cmd.add_argument("--release", action="store_true",
                             help="cancel and release: once the job has ended, drop what its sources hold on their "
                                  "servers (a Postgres-CDC replication slot, so the server frees its WAL); the job "
                                  "can then only start fresh (resume --fallback fresh). Also for a job already "
                                  "CANCELED or FAILED")
        cmd.add_argument("--json", action="store_true", help="print JSON")
        _add_store_args(cmd)

    resume = sub.add_parser("resume", help="resume a stopped, failed or killed job from its checkpoints")
    resume.add_argument("job_id")
    resume.add_argument("--from", dest="savepoint", type=int, metavar="SAVEPOINT_ID",
                        help="restore from this savepoint instead of the latest checkpoints")
    resume.add_argument("--fallback", choices=["fail", "fresh"], default=None,
                        help="when a checkpoint is missing or does not fit: fail (default) or start over")
    resume.add_argument("--config", default=None, help="a changed job file (default: the job's own)")
    resume.add_argument("-i", dest="variables", action="append", metavar="NAME=VALUE")
    _add_strict_arg(resume)
    _add_store_args(resume)

    dismiss = sub.add_parser("dismiss-left", help="stop showing a slot a job's release left, once it is dropped "
                                                  "by hand (or its server is gone for good)")
    dismiss.add_argument("job_id")
    dismiss.add_argument("slot", help="the slot's name, as its LEFT line says")
    _add_store_args(dismiss)

    checkpoints = sub.add_parser("checkpoints", help="a job's checkpoint health and history")
    checkpoints.add_argument("job_id")
    checkpoints.add_argument("--json", action="store_true")
    checkpoints.add_argument("--limit", type=int, default=20)
    _add_store_args(checkpoints)

    archive = sub.add_parser("jvm-archive", help="build the driver JVM's class archive (faster driver start-up)")
    archive.add_argument("--rebuild", action="store_true", help="build it again even if it exists")

    cluster = sub.add_parser("cluster", help="run a cluster process")
    roles = cluster.add_subparsers(dest="role", required=True)
    coord = roles.add_parser("coordinator", help="serve REST and compete for leadership")
    coord.add_argument("--host", default="127.0.0.1")
    coord.add_argument("--port", type=int, default=8080)
    _cluster_common(coord)
    coord.add_argument("--history-job-expire-minutes", type=float, default=1440)
    coord.add_argument("--retained-warn", type=_size, default=None, metavar="SIZE",
                       help="warn when a CDC source's replication slot retains, or its binlog position is behind "
                            "by, more than this (e.g. 512MiB; default SEATIDE_RETAINED_WARN_BYTES or 1GiB)")
    coord.add_argument("--retained-check-interval", type=float, default=None, metavar="S",
                       help="how often the leader measures what CDC sources hold on their servers "
                            "(default SEATIDE_RETAINED_CHECK_INTERVAL or 60)")
    _add_token_arg(coord)
    coord.add_argument("--auth-reads", action="store_true",
                       help="reads (GET), /metrics and the UI need the API token too")
    coord.add_argument("--max-request-bytes", type=int, default=4 * 1024 * 1024,
                       help="larger request bodies are refused with 413 (default 4 MiB)")
    coord.add_argument("--no-plan-warm-up", dest="plan_warm_up", action="store_false",
                       help="do not plan a sample job at start (the first submit then pays the imports)")
    worker = roles.add_parser("worker", help="launch and supervise drivers")
    _cluster_common(worker)
    worker.add_argument("--slots", type=int, default=2)
    worker.add_argument("--spark-conf", dest="spark_conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for every driver this worker launches, under the job's env "
                             "(which wins), e.g. spark.master=spark://host:7077; repeat for more "
                             "(see docs/spark-cluster.md)")
    worker.add_argument("--warm-drivers", type=_warm_drivers, default=1, metavar="N",
                        help="driver processes kept started, Spark session and all, so an attempt "
                             "skips the start-up (default 1; 0: start every driver cold). "
                             "Each holds a JVM; see docs/operations.md")
    return parser


def _cluster_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=os.environ.get("SEATIDE_STORE"))
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--node-id", default=None)
    _add_timeout_args(parser)


def _add_timeout_args(parser: argparse.ArgumentParser) -> None:
    """Every timeout, on every cluster process: some margins join a worker's and the leader's."""
    from seatide.timeouts import SETTINGS, Timeouts

    group = parser.add_argument_group("timeouts (seconds; see docs/operations.md)")
    for setting in SETTINGS:
        group.add_argument(setting.flag, dest=setting.name, type=float, default=None, metavar="S",
                           help=f"{setting.doc} (default {getattr(Timeouts, setting.name):g})")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command_line("seatide", lambda: _dispatch(args))


def _dispatch(args) -> int:
    if args.command == "check":
        from seatide.cli.check import check_command
        return check_command(args)
    if args.command == "run":
        from seatide.cli.run import run_command
        return run_command(args)
    if args.command == "resume" and not args.cluster and not args.store:
        from seatide.cli.run import resume_command   # local mode: in the foreground, like run
        return resume_command(args)
    if args.command == "jvm-archive":
        return _jvm_archive(args)
    if args.command == "cluster":
        from seatide.cli.cluster import cluster_command
        return cluster_command(args)
    from seatide.cli.client import client_command
    return client_command(args)


def _jvm_archive(args) -> int:
    from seatide.runtime import class_archive

    if not class_archive.enabled():
        print(f"the JVM class archive is off ({class_archive.ENABLED_ENV}=0): nothing to build")
        return 0
    from seatide.cli.args import CommandRefused
    try:
        path = class_archive.build(force=args.rebuild)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:   # drivers still start, only slower
        raise CommandRefused(f"{exc}\ndrivers start without the archive until it is built") from exc
    print(f"{path} ({os.path.getsize(path) / 2**20:.0f} MiB): drivers map it at start")
    return 0


if __name__ == "__main__":
    sys.exit(main())
