"""How a worker starts a driver for an attempt assigned to it: claimed by compare-and-set
(ASSIGNED to LAUNCHING), so however often or concurrently it is seen, one process starts; then
forked cold, or handed to a warm driver (``warm_pool.py``).

A mixin of ``Worker`` (``agent.py``), which calls ``_launch`` from its loop; a launch meets the
liveness fence only under ``LockRegain.mutex``, never held across the fork (``presence.py``).
"""

from __future__ import annotations

import json
import logging
import os
import sys

from sqlalchemy import and_, select, update

from seatide import clock, failpoints
from seatide.runtime.data_ends import ends_without_spark
from seatide.runtime.session import SPARK_CONF_ENV, WORKER_SPARK_CONF_ENV, warm_session_fit
from seatide.runtime.warm_driver import warm_session_conf
from seatide.store import schema as s
from seatide.store.clock import store_now
from seatide.store.events import record_event, run_of_incarnation
from seatide.store.paths import driver_log_path
from seatide.store.sessions import session_ended
from seatide.store.states import AttemptState
from seatide.worker.driver_log import LOG_MASKING, DriverLog

log = logging.getLogger(__name__)

SPARK_CONF_CACHE = 256      # distinct job texts whose Spark settings a worker remembers
UNLAUNCHED = ("not launched: its worker claimed it, then could not start its driver (its liveness lock not shown "
              "held in time, or the store away on the way): not the job's failure, retried without counting "
              "against job.retry.times")


class DriverLaunch:
    def claim(self, attempt) -> bool:
        with self.store.write() as conn:
            claimed = conn.execute(update(s.attempts).where(and_(
                s.attempts.c.attempt_id == attempt.attempt_id, s.attempts.c.worker_id == self.node_id,
                s.attempts.c.state == AttemptState.ASSIGNED)).values(state=AttemptState.LAUNCHING,
                                                          launched_at=store_now(conn))).rowcount
            if claimed:
                record_event(conn, "DRIVER_LAUNCHING", f"worker:{self.node_id}", attempt.job_id,
                             attempt.incarnation, attempt=attempt.attempt_id,
                             run_id=run_of_incarnation(attempt.job_id, attempt.incarnation))
        return claimed == 1

    def _launch(self, attempt) -> None:
        if self._regain.may_launch(clock.monotonic()):      # asked again at the fork
            self._launch_claimed(attempt)

    def _launch_claimed(self, attempt) -> None:
        if attempt.attempt_id in self.children or not self.claim(attempt):
            return
        try:
            self._start_claimed(attempt)
        except Exception as exc:
            if attempt.attempt_id not in self.children and not (session_ended(exc) or isinstance(exc, ConnectionError)):
                # Not the store's absence (that one the loop's next step ends, uncharged): a fork
                # refused, a log it cannot write. Charged, as a failed start, so that one that
                # fails every time runs out of job.retry.times.
                error = f"its driver could not be started: {exc}"
                self._step_on_new_session(lambda: self.record_exit(attempt.attempt_id, None, error=error),
                                          "ending an attempt not launched")
            raise

    def _start_claimed(self, attempt) -> None:
        failpoints.hit("worker.after_claim")
        log_path = driver_log_path(self.data_dir, attempt.job_id, attempt.attempt_id)
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        command = [sys.executable, "-m", "seatide.runtime.driver", "driver", "--store", self.store_url,
                   "--job-id", attempt.job_id, "--attempt", str(attempt.attempt_id),
                   "--heartbeat-interval", str(self.timeouts.driver_heartbeat_interval),
                   "--self-fence-after", str(self.timeouts.driver_self_fence_after)]
        conf = self._spark_conf(attempt.job_id)
        if conf is not None and ends_without_spark(self.store, attempt.job_id, attempt.incarnation):
            # Its driver ends it without Spark (runtime/data_ends.py, the same test): no warm driver
            # spent on it, no JVM forked beside its decision.
            conf = None
        log_file = self._driver_log(attempt.job_id, log_path)
        LOG_MASKING.hold((self.node_id, attempt.attempt_id), log_file.secrets)     # a misfit names a value
        proc = self._start_driver(attempt, command, conf, log_file)
        if proc is None:
            return
        failpoints.hit("worker.after_launch")
        # Its own step: a retried loop step finds the driver among our children and would not
        # write its pid again.
        self._step_on_new_session(lambda: self._record_pid(attempt.attempt_id, proc.pid), "recording a pid")
        log.info("launched driver pid %s for job %s attempt %s", proc.pid, attempt.job_id, attempt.attempt_id)

    def _start_driver(self, attempt, command: list[str], conf: dict | None, log_file: DriverLog):
        """The fork (or the hand-off to a warm driver, which waits for its answer), outside the
        liveness mutex: the fence must never wait for it. A fence during a hand-off kills the
        driver being handed the attempt (``WarmPool.kill_handing``); a fence during a fork did
        not see the new driver, so it dies here, as the fence's. None: not started, the lock
        not shown held in time (the attempt is ended now, or at the loop's next step, as the
        outage's: uncharged)."""
        armed = failpoints.armed_for_job(attempt.job_id)
        regain = self._regain
        with regain.mutex:
            fences = regain.fences
            open_ = regain.may_launch(clock.monotonic())
        if open_:
            # a warm driver read its failpoints when it started: a job that arms some goes cold
            proc = None if armed else self._hand_to_warm_driver(attempt, conf, log_file,
                                                                go_on=lambda: regain.fences == fences)
            if proc is None and regain.fences == fences:
                proc = self.launcher.start(command, log_file, self._driver_env(conf, armed=armed),
                                           self.inherit_stdout)
            if proc is not None:
                with regain.mutex:
                    self.children[attempt.attempt_id] = proc
                    if regain.fences == fences:
                        return proc
                    self._killed_for_outage.add(attempt.attempt_id)
                    proc.kill()
                log.error("driver pid %s of job %s attempt %s killed: its worker's drivers were fenced as it "
                          "started", proc.pid, attempt.job_id, attempt.attempt_id)
                return None
        log.warning("job %s attempt %s not launched: this worker's liveness lock is not shown held",
                    attempt.job_id, attempt.attempt_id)
        LOG_MASKING.drop((self.node_id, attempt.attempt_id))
        log_file.close()
        try:
            self._step_on_new_session(lambda: self.record_exit(attempt.attempt_id, None, error=UNLAUNCHED,
                                                               store_outage=True), "ending an attempt not launched")
        except Exception as exc:     # the loop's next step ends it, the same way
            log.warning("job %s attempt %s: not ended yet (%s)", attempt.job_id, attempt.attempt_id, exc)
        return None

    def _record_pid(self, attempt_id: int, pid: int) -> None:
        with self.store.write() as conn:
            conn.execute(update(s.attempts).where(and_(
                s.attempts.c.attempt_id == attempt_id, s.attempts.c.pid.is_(None))).values(pid=pid))

    def _driver_log(self, job_id: str, log_path: str) -> DriverLog:
        """The attempt's log file, each line masked by the job's secrets (``driver_log``)."""
        from seatide.secrets import secret_values

        with self.store.read() as conn:
            job = conn.execute(select(s.jobs.c.config, s.jobs.c.variables).where(s.jobs.c.job_id == job_id)).first()
        # the same parse as the job's Spark settings (config.job_text caches it per job text)
        secrets = secret_values(job.config, json.loads(job.variables)) if job is not None else frozenset()
        return DriverLog(log_path, secrets)

    def _hand_to_warm_driver(self, attempt, conf: dict | None, log_file: DriverLog, go_on=lambda: True):
        """A warm driver's process, now running the claimed attempt; None: start a cold one."""
        if not self.warm_pool.size or conf is None:      # None: a config error the driver reports
            return None
        fit = warm_session_fit({**self.spark_conf, **conf}, warm_session_conf())
        if fit.cold_because is not None:
            log.info("job %s attempt %s gets a cold driver: %s", attempt.job_id, attempt.attempt_id,
                     fit.cold_because)
            return None
        return self.warm_pool.take(attempt.job_id, attempt.attempt_id, fit.runtime_conf, log_file, go_on)

    def _driver_env(self, conf: dict | None, worker_conf: bool = True, armed: str = "") -> dict[str, str]:
        """A driver's environment; ``worker_conf``: with this worker's ``--spark-conf`` (a warm
        driver's session is the default one: a job that needs the worker's settings goes cold);
        ``armed``: its job's failpoints, after the worker's own (the later wins a point)."""
        env = dict(os.environ)
        if armed:
            env[failpoints.POINTS_ENV] = ",".join(p for p in (env.get(failpoints.POINTS_ENV), armed) if p)
        env["PYSPARK_PYTHON"] = sys.executable
        env["PYSPARK_DRIVER_PYTHON"] = sys.executable
        env.setdefault("PYTHONUNBUFFERED", "1")
        if worker_conf and self.spark_conf:
            env[WORKER_SPARK_CONF_ENV] = json.dumps(self.spark_conf)
        if conf is not None:   # lets the driver start its JVM while it reads the rest of the job
            env[SPARK_CONF_ENV] = json.dumps(conf)
        return env

    def _spark_conf(self, job_id: str) -> dict | None:
        from seatide.config.job import ConfigError
        from seatide.config.loader import load_job_env, spark_conf_for
        from seatide.plugin.options import OptionError

        with self.store.read() as conn:
            job = conn.execute(select(s.jobs.c.config, s.jobs.c.variables).where(s.jobs.c.job_id == job_id)).first()
        # Once per distinct job text, not once per launch (a worker given hundreds of attempts of
        # a few job files would otherwise read and parse each text again).
        key = (job.config, job.variables)
        if key not in self._spark_confs:
            try:
                conf = spark_conf_for(load_job_env(job.config, json.loads(job.variables)))
            except (ConfigError, OptionError):
                conf = None   # the driver reports the config error itself
            if len(self._spark_confs) >= SPARK_CONF_CACHE:
                self._spark_confs.pop(next(iter(self._spark_confs)))
            self._spark_confs[key] = conf
        conf = self._spark_confs[key]
        return dict(conf) if conf is not None else None
