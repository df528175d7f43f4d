"""A real Prometheus server (Debian's ``prometheus``) scraping coordinators, for dashboard tests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.parse
import urllib.request

from seatide.testing.cluster import free_port, wait_for


class Prometheus:
    """Scrapes ``targets`` (host:port) every second as scrape job ``seatide``; ``query`` runs PromQL."""

    def __init__(self, workdir: str, targets: list[str]):
        binary = shutil.which("prometheus")
        assert binary, "the prometheus binary is missing: run scripts/setup (Debian package prometheus)"
        os.makedirs(workdir, exist_ok=True)
        config = os.path.join(workdir, "prometheus.yml")
        with open(config, "w") as handle:
            json.dump({"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},   # JSON is YAML
                       "scrape_configs": [{"job_name": "seatide", "static_configs": [{"targets": targets}]}]},
                      handle)
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log_path = os.path.join(workdir, "prometheus.log")
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir}/tsdb",
                 f"--web.listen-address={self.url.split('//')[1]}"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_for(lambda: self._ready(), 30, message="prometheus ready")

    def _ready(self) -> bool:
        with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as response:
            return response.status == 200

    def query(self, expr: str) -> list[dict]:
        """The instant vector ``expr`` evaluates to now; a bad expression fails with Prometheus's message."""
        url = self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"prometheus refused {expr!r}: {exc.read().decode()}") from None
        assert body["status"] == "success", body
        return body["data"]["result"]

    def stop(self) -> None:
        self.popen.kill()
        self.popen.wait(timeout=30)
