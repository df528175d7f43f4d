"""The ``env`` block: job-wide settings, declared once with their defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from seatide.config.job_text import flatten
from seatide.plugin.options import (BOOL, INT, LIST, STRING, STRING_LIST, KeyCheck, Option, OptionError, UnknownOption,
                                    enum, read_options)

ENV_OPTIONS: tuple[Option, ...] = (
    Option("job.name", STRING, "SeaTide", "name shown in lists and the UI"),
    Option("job.mode", enum("BATCH", "STREAMING"), "BATCH",
           "BATCH runs bounded sources to their end; STREAMING keeps running"),
    # The execution.* aliases are the legacy Flink-style names of SeaTunnel 1.x job files.
    Option("parallelism", INT, 1, "readers per source and the default for every plugin",
           aliases=("execution.parallelism",)),
    Option("checkpoint.interval", INT, None,
           "ms between micro-batches; every committed micro-batch is a checkpoint. "
           "STREAMING default 10000; BATCH without it runs as one plain Spark job",
           aliases=("execution.checkpoint.interval",)),
    Option("checkpoint.timeout", INT, 60000, "ms a checkpoint may take before it counts as failed",
           aliases=("execution.checkpoint.timeout",)),
    Option("checkpoint.stale-after", INT, None,
           "ms without a completed checkpoint (while data is pending) before a STREAMING job is "
           "CHECKPOINT_STALE; default max(checkpoint.interval, checkpoint.timeout) x 3"),
    Option("checkpoint.on-stale", enum("warn", "restart", "fail"), "restart",
           "what a stale job gets: warn (flag only), restart (a new attempt from the latest "
           "checkpoint), fail"),
    Option("checkpoint.retained", INT, 100, "how many recent micro-batches stay recoverable"),
    Option("restore.fallback", enum("fail", "fresh"), "fail",
           "when a resume finds no usable checkpoint: fail (refuse), or fresh (start over, with a warning event)"),
    Option("micro-batch.max-rows", INT, 1_000_000,
           "BATCH with checkpoints: at most this many rows per micro-batch (each batch costs ~0.35 s)"),
    Option("job.retry.times", INT, 3, "new attempts after a failure before the job is FAILED"),
    Option("job.retry.interval.seconds", INT, 3, "wait before each new attempt (none when the attempt's worker is gone)"),
    Option("job.progress-timeout", INT, 600_000,
           "SeaTide: ms without a committed batch and without a completed Spark task before a running "
           "job is HUNG (its tasks deadlocked while the driver lives); 0 turns the watchdog off"),
    Option("job.on-hung", enum("warn", "restart", "fail"), "restart",
           "SeaTide: what a HUNG job gets: warn (flag only), restart (a new attempt from the latest "
           "checkpoint, counted against job.retry.times), fail"),
    Option("state-cleanup-delay", INT, None,
           "seconds after the end before the job's state is cleaned up (default: the coordinator's, 60)"),
    Option("spark.master", STRING, "local[*]",
           "Spark master URL; spark://host:port runs executors on a standalone cluster "
           "(docs/spark-cluster.md). Default: the worker's --spark-conf spark.master, else local[*]"),
    Option("jars", STRING, None,
           "third-party jars for the job's Spark session, separated by ';' (SeaTunnel's form) or ','; "
           "added to spark.jars"),
    # Accepted so SeaTunnel job files run unchanged; they do not change what SeaTide does.
    Option("read_limit.rows_per_second", INT, None, "accepted for compatibility; not enforced"),
    Option("read_limit.bytes_per_second", INT, None, "accepted for compatibility; not enforced"),
    Option("shade.identifier", STRING, None,
           "default, base64 or aes256 (SeaTide's): the encryption of username, password, auth, token, "
           "access_key, secret_key and shade.options in source and sink blocks (seatide.config.shade)"),
    Option("shade.options", STRING_LIST, [], "more option keys the shade covers (dotted keys reach nested ones)"),
    Option("shade.key-file", STRING, None,
           "SeaTide: the aes256 key file (32 bytes: raw, hex or Base64) where the job runs; "
           "default: the SEATIDE_SHADE_KEY_FILE environment variable"),
    Option("savemode.execute.location", STRING, None, "accepted for compatibility"),
    Option("sql.udfs", LIST, [],
           "SeaTide: Python functions usable as SQL functions in every Sql transform of the job "
           "(entries as in Sql's udfs; a transform's own udfs win on a name clash)"),
    Option("secret.variables", STRING_LIST, [],
           "SeaTide: names of variables (-i name=value) whose values are secret and masked in every "
           "output, like options named password, token, secret_key (docs/security.md)"),
    Option("print.execution.plan", BOOL, False, "log Spark's physical plan of each pipeline"),
    Option("strict", BOOL, False,
           "SeaTide: unknown keys in env and plugin blocks are errors (as with --strict) "
           "instead of warnings"),
)

STREAMING_DEFAULT_INTERVAL_MS = 10_000
MAX_INT = 2**31 - 1


@dataclass(frozen=True)
class JobEnv:
    name: str
    mode: str
    parallelism: int
    checkpoint_interval_ms: int | None
    checkpoint_timeout_ms: int
    micro_batch_max_rows: int
    retry_times: int
    retry_interval_s: int
    state_cleanup_delay_s: int | None
    stale_after_ms: int | None
    on_stale: str
    checkpoints_retained: int
    restore_fallback: str
    print_plan: bool
    spark_conf: dict[str, str]
    strict: bool = False
    progress_timeout_ms: int = 600_000
    on_hung: str = "restart"
    sql_udfs: tuple = ()                       # sql.udfs entries as written, checked by read_env
    unknown: tuple[UnknownOption, ...] = ()    # env keys nobody declared (lenient reads only)

    @property
    def streaming(self) -> bool:
        return self.mode == "STREAMING"

    @property
    def micro_batch(self) -> bool:
        """Checkpointed execution: every STREAMING job, and BATCH jobs with an interval."""
        return self.streaming or self.checkpoint_interval_ms is not None

    @property
    def trigger_interval_ms(self) -> int:
        return self.checkpoint_interval_ms or STREAMING_DEFAULT_INTERVAL_MS

    @property
    def stale_after_s(self) -> float | None:
        """STREAMING only: a bounded job ends by itself; its progress is the progress display's."""
        if not self.streaming:
            return None
        if self.stale_after_ms is not None:
            return self.stale_after_ms / 1000
        return max(self.trigger_interval_ms, self.checkpoint_timeout_ms) * 3 / 1000

    @property
    def progress_timeout_s(self) -> float | None:
        """Every mode: a bounded job that hangs never ends by itself. None: the watchdog is off."""
        return self.progress_timeout_ms / 1000 if self.progress_timeout_ms > 0 else None


# Spark's ${env:NAME} / ${system:name} filling of SQL text: kept off (runtime/session.py).
SQL_SUBSTITUTION = "spark.sql.variable.substitute"


def read_env(block: Mapping[str, Any], strict: bool = False) -> JobEnv:
    """Validate the env block; ``spark.*`` keys pass through to Spark as strings.

    Unknown keys are kept in ``JobEnv.unknown`` unless ``strict`` (the CLI's ``--strict``)
    or the block's own ``strict = true`` makes the first of them an error.
    """
    flat = flatten(block)
    spark = {k: _spark_value(v) for k, v in flat.items()
             if k.startswith("spark.") and not isinstance(v, Mapping)}
    if spark.get(SQL_SUBSTITUTION, "false").lower() != "false":
        raise OptionError(SQL_SUBSTITUTION, f"env option '{SQL_SUBSTITUTION}' cannot be turned on: SeaTide keeps "
                          "Spark's ${...} filling of SQL text off, as it would read the driver's environment and "
                          "system properties into the job; write the value into the query, or give it with -i")
    rest = {k: v for k, v in block.items() if k != "spark"}
    declared = [o for o in ENV_OPTIONS if o.key != "spark.master"]
    opts = read_options(rest, declared, strict=False)
    if opts.unknown and (strict or opts["strict"]):
        read_options(rest, declared, strict=True)     # raises for the first unknown key
    if opts["jars"]:
        jars = [j.strip() for j in opts["jars"].replace(";", ",").split(",") if j.strip()]
        if spark.get("spark.jars"):
            jars.insert(0, spark["spark.jars"])
        spark["spark.jars"] = ",".join(jars)
    for key in ("parallelism", "micro-batch.max-rows", "checkpoint.timeout", "checkpoint.retained",
                "checkpoint.stale-after"):
        if opts[key] is not None and opts[key] < 1:
            raise OptionError(key, f"option '{key}' must be at least 1, got {opts[key]}")
    for option in ENV_OPTIONS:    # the store keeps them in 32-bit columns
        if option.type is INT and opts[option.key] is not None and opts[option.key] > MAX_INT:
            raise OptionError(option.key, f"option '{option.key}' must be at most {MAX_INT}, got {opts[option.key]}")
    interval = opts["checkpoint.interval"]
    if interval is not None and interval < 1:
        raise OptionError("checkpoint.interval", "option 'checkpoint.interval' must be a positive "
                          f"number of milliseconds, got {interval}")
    for key in ("job.retry.times", "job.progress-timeout"):
        if opts[key] < 0:
            raise OptionError(key, f"option '{key}' must be 0 or more, got {opts[key]}")
    sql_udfs = tuple(opts["sql.udfs"])
    unknown = list(opts.unknown)
    if sql_udfs:
        _check_udfs(sql_udfs, KeyCheck(strict or opts["strict"], into=unknown))
    return JobEnv(
        name=opts["job.name"], mode=opts["job.mode"], parallelism=opts["parallelism"],
        checkpoint_interval_ms=(interval if interval is not None
                                else STREAMING_DEFAULT_INTERVAL_MS if opts["job.mode"] == "STREAMING"
                                else None),
        checkpoint_timeout_ms=opts["checkpoint.timeout"],
        micro_batch_max_rows=opts["micro-batch.max-rows"],
        retry_times=opts["job.retry.times"], retry_interval_s=opts["job.retry.interval.seconds"],
        state_cleanup_delay_s=opts["state-cleanup-delay"], stale_after_ms=opts["checkpoint.stale-after"],
        on_stale=opts["checkpoint.on-stale"], checkpoints_retained=opts["checkpoint.retained"],
        restore_fallback=opts["restore.fallback"], print_plan=opts["print.execution.plan"],
        spark_conf=spark, strict=strict or opts["strict"], unknown=tuple(unknown), sql_udfs=sql_udfs,
        progress_timeout_ms=opts["job.progress-timeout"], on_hung=opts["job.on-hung"])


def _check_udfs(entries: tuple, check_keys: KeyCheck) -> None:
    """Load the job-wide UDFs once at load time, so a bad entry fails before Spark starts."""
    from seatide.sql.udf import UdfError, check_types, load_udfs

    try:
        check_types(load_udfs(list(entries), check_keys, "sql.udfs"))
    except UdfError as exc:
        raise OptionError("sql.udfs", f"env option 'sql.udfs': {exc}") from None


def _spark_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
