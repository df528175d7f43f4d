"""``seatide cluster coordinator|worker``: the long-running processes of a cluster."""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
import threading

from seatide.cli.args import EXIT_BAD_CONFIG, EXIT_FAILED, EXIT_OK, default_data_dir


def _store_url(args) -> tuple[str, str]:
    from seatide.store.address import default_store_url

    data_dir = os.path.abspath(args.data_dir or default_data_dir())
    return (args.store or default_store_url(data_dir)), data_dir


def cluster_command(args) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from seatide.store.clock import skew_wall_clock_for_tests
    from seatide.store.db import StoreUnavailable, open_store

    skew_wall_clock_for_tests()
    timeouts = _timeouts(args)       # before the store: a bad combination costs no connection
    spark_conf = _spark_settings(args.spark_conf) if args.role == "worker" else {}
    logging.getLogger("seatide.timeouts").info("timeouts: %s", timeouts.described())
    url, data_dir = _store_url(args)
    try:
        store = open_store(url, wait_for_server=True)   # a supervisor's restarts would give up
    except StoreUnavailable as exc:
        print(f"seatide: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.role == "coordinator":
        return _coordinator(args, store, data_dir, timeouts)
    return _worker(args, store, url, data_dir, timeouts, spark_conf)


def _timeouts(args):
    from seatide.cli.args import CommandRefused
    from seatide.timeouts import TimeoutsError, timeouts_from_flags

    try:
        return timeouts_from_flags(vars(args)).check()
    except TimeoutsError as exc:
        raise CommandRefused(f"{exc}; see docs/operations.md", EXIT_BAD_CONFIG) from None


def _spark_settings(pairs: list[str]) -> dict[str, str]:
    from seatide.cli.args import CommandRefused

    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip().startswith("spark."):
            raise CommandRefused(f"--spark-conf {pair!r}: expected KEY=VALUE with a spark.* key, "
                                 "e.g. --spark-conf spark.master=spark://host:7077", EXIT_BAD_CONFIG)
        settings[key.strip()] = value.strip()
    return settings


def _coordinator(args, store, data_dir: str, timeouts) -> int:
    import uvicorn

    from seatide.api.auth import TokenError, load_token
    from seatide.api.metrics import CoordinatorMetrics
    from seatide.api.rest import create_app
    from seatide.coordinator.service import Coordinator
    from seatide.store.db import Store

    try:
        token = load_token(args.api_token_file)
    except TokenError as exc:
        print(f"seatide: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    if args.auth_reads and not token:
        print("seatide: --auth-reads needs an API token: pass --api-token-file PATH or set SEATIDE_API_TOKEN",
              file=sys.stderr)
        return EXIT_BAD_CONFIG
    if args.max_request_bytes < 1:
        print("seatide: --max-request-bytes must be at least 1", file=sys.stderr)
        return EXIT_BAD_CONFIG
    from seatide.store.liveness import liveness_for

    url = f"http://{args.host}:{args.port}"
    from seatide.coordinator.source_watch import WatchRules
    try:
        watch = WatchRules.from_environment(args.retained_check_interval, args.retained_warn)
    except ValueError as exc:
        print(f"seatide: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    coordinator = Coordinator(store, node_id=args.node_id, url=url, timeouts=timeouts,
                              history_expire_s=args.history_job_expire_minutes * 60, data_dir=data_dir,
                              liveness=liveness_for(store, timeouts), watch=watch)
    # The API and metrics read through a connection pool of their own: concurrent requests
    # (up to the server's thread pool) holding every connection of a shared pool would make
    # the leader's renewal wait for one, past its lease.
    readers = Store(store.url)
    metrics = CoordinatorMetrics(readers, coordinator.node_id)
    coordinator.observe_tick = metrics.reconcile_tick.observe
    app = create_app(readers, data_dir, coordinator.node_id, cleanup_delay_s=timeouts.state_cleanup_delay,
                     metrics=metrics, on_write=coordinator.wake,
                     api_token=token, auth_reads=args.auth_reads, max_request_bytes=args.max_request_bytes)
    coordinator.start()
    try:
        _serve(args, app, uvicorn)
    finally:
        coordinator.stop()       # resign the lease, mark this node's row stopped
        readers.dispose()
    return EXIT_OK


def _stop_asked(signum, frame):
    raise SystemExit(EXIT_OK)


def _serve(args, app, uvicorn) -> None:
    """Serve until SIGTERM or Ctrl-C; either ends in an exception through the caller's ``finally``.

    uvicorn (0.29 and later) catches both while it serves, shuts the server down, then raises the signal again
    with the handler from before: SIGTERM's default would kill the process before the clean stop, so both raise
    SystemExit(0), a stop asked for, as the worker's do. Ctrl-C left to Python's handler ended 130 or 0 by a race
    (asyncio's runner takes SIGINT over while that handler is the default one: a fresh-clone run, stop 56).
    """
    from seatide.plan.warm_up import plan_sample_job_soon

    signal.signal(signal.SIGTERM, _stop_asked)
    signal.signal(signal.SIGINT, _stop_asked)
    # Everything imported and built at start lives as long as the process: out of the
    # collector's sight, a full collection walks only what requests made (it took 25-85 ms, a
    # slow request's tail at a thousand jobs, with the start-up heap in it).
    if args.plan_warm_up:
        plan_sample_job_soon(then=gc.freeze)     # the config reader and plugins it imports too
    else:
        gc.freeze()
    uvicorn.Server(uvicorn.Config(app, host=args.host, port=args.port, log_level="warning")).run()


def _worker(args, store, url: str, data_dir: str, timeouts, spark_conf: dict[str, str]) -> int:
    from seatide.store.liveness import liveness_for
    from seatide.worker.agent import Worker
    from seatide.worker.presence import WorkerRefused

    worker = Worker(store, url, data_dir, node_id=args.node_id, slots=args.slots, timeouts=timeouts,
                    spark_conf=spark_conf, liveness=liveness_for(store, timeouts),
                    warm_drivers=args.warm_drivers)
    stop = threading.Event()

    def on_signal(signum, frame):
        worker.stop()
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        worker.run()     # in the main thread: drivers die with it (PR_SET_PDEATHSIG)
    except WorkerRefused as exc:
        print(f"seatide: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    return EXIT_OK
