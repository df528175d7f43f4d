"""How each simulated process takes a step of the real control-plane code: a coordinator's
lease tick and reconcile step, a worker's loop step and its liveness watch (a thread of its own,
run as time passes), a driver's step. A mixin of ``World`` (``world.py``), which owns the
processes, the faults and the clock."""

from __future__ import annotations

from seatide.coordinator.service import Coordinator, node_heartbeat
from seatide.store.db import NotLeader
from seatide.testing import stalls
from seatide.testing.sim_machine import Proc, StorePartitioned
from seatide.worker.lock_regain import LockState
from seatide.worker.presence import WorkerRefused

class Steps:
    def advance(self, proc: Proc, roll: float) -> str:
        self.current = proc
        try:
            if proc.stalled is not None:
                return stalls.stalled_step(self, proc)
            if proc.kind == "coordinator":
                return self._coordinator_step(proc)
            if proc.kind == "worker":
                return self._worker_step(proc)
            return self._driver_step(proc, roll)
        finally:
            self.current = None

    def _coordinator_step(self, proc: Proc) -> str:
        coordinator: Coordinator = proc.obj
        try:
            if proc.reconciling is None:
                if self.now() - proc.last_beat >= 1.0:
                    node_heartbeat(proc.store, proc.name)
                    proc.last_beat = self.now()
                leading = coordinator.lease.tick()
                if coordinator.lease.blind:        # as Coordinator._loop: a blind spot is not silence
                    coordinator.lease.blind = False
                    coordinator.store_gap()
                if not leading:
                    return "follower"
                proc.reconciling = coordinator.reconcile_steps()
            next(proc.reconciling)
            return f"leader (epoch {coordinator.lease.epoch}): reconcile step"
        except StopIteration:
            proc.reconciling = None
            return f"leader (epoch {coordinator.lease.epoch}): pass done"
        except (StorePartitioned, NotLeader) as exc:
            proc.reconciling = None
            if isinstance(exc, StorePartitioned):
                coordinator.store_gap()
            return f"{type(exc).__name__}: {exc}"
        except Exception as exc:
            proc.reconciling = None
            self.check.fail(f"coordinator {proc.name} raised {type(exc).__name__}: {exc}")
            return f"raised {exc!r}"

    def _worker_step(self, proc: Proc) -> str:
        try:
            # its heartbeat thread: paused while its drivers are fenced, as a real worker's
            if self.now() - proc.last_beat >= 1.0 and proc.obj._regain.state is not LockState.FENCED:
                node_heartbeat(proc.store, proc.name)
                proc.last_beat = self.now()
            proc.obj.step()
            return "step"
        except StorePartitioned as exc:
            return str(exc)
        except Exception as exc:
            self.check.fail(f"worker {proc.name} raised {type(exc).__name__}: {exc}")
            return f"raised {exc!r}"

    def _watch_locks(self) -> None:
        """A worker's liveness watch and fence are threads of their own: they run as time passes,
        every ``check_every``, not when its loop happens to take a step (a worker whose loop was
        not chosen for a while is not starved; a paused one is, and is fenced when it wakes)."""
        for proc in self.procs.values():
            if proc.kind != "worker" or not proc.runnable or proc.obj is None or self.locks is None:
                continue
            if self.t - proc.watched_at < proc.obj._regain.check_every():
                continue
            proc.watched_at = self.t
            self.current = proc
            try:
                proc.obj.fence_if_due()
                proc.obj.check_liveness_lock()
            except (ConnectionError, WorkerRefused):     # as the thread: tried again at the next check
                pass
            except Exception as exc:
                self.check.fail(f"worker {proc.name}'s liveness watch raised {type(exc).__name__}: {exc}")
            finally:
                self.current = None

    def _driver_step(self, proc: Proc, roll: float) -> str:
        try:
            return proc.obj.step(roll, self.now())
        except Exception as exc:
            self.check.fail(f"driver {proc.name} raised {type(exc).__name__}: {exc}")
            proc.obj.exit(1)
            return f"raised {exc!r}"
