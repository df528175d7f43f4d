"""A private Redis server for tests: Debian's redis-server on a free port, in a directory of its own,
nothing persisted; optionally with a password and an ACL user of limited rights."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

from seatide.testing.cluster import free_port


class PrivateRedis:
    def __init__(self, workdir: str, password: str | None = None, acl: list[str] = ()):
        self.dir = workdir
        self.port = free_port()
        self.password = password
        os.makedirs(workdir, exist_ok=True)
        lines = [f"port {self.port}", "bind 127.0.0.1", f"dir {workdir}", 'save ""', "appendonly no",
                 "daemonize no", f"logfile {os.path.join(workdir, 'redis.log')}"]
        if password is not None:
            lines.append(f"requirepass {password}")
        lines += [f"user {rule}" for rule in acl]
        conf = os.path.join(workdir, "redis.conf")
        with open(conf, "w", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
        server = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.process = subprocess.Popen([server, conf], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30.0) -> None:
        import redis

        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}; see {self.dir}/redis.log")
            try:
                client = self.client()
                client.ping()
                client.close()
                return
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def client(self, **kw):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, **kw)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)


__all__ = ["PrivateRedis"]
