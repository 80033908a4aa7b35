"""A real Prometheus server for the tests: its own process, config and storage; stopped by its starter."""

import json
import shutil
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.server_process import ServerProcess, free_port

#: The tests that start a Prometheus server run only when this variable is 1 (.ci/run sets it).
OPT_IN = "DBJOBS_TEST_PROMETHEUS"


@dataclass(frozen=True)
class Target:
    """An endpoint to scrape: `address` as host:port, its path, and a bearer token if it needs one."""

    address: str
    path: str = "/metrics"
    token: str | None = None


class PrometheusServer(ServerProcess):
    """``prometheus`` (Debian's package) scraping `targets` every second, on a free local port."""

    def __init__(self, targets: list[Target], directory: Path, rule_files: tuple[Path, ...] = ()):
        binary = shutil.which("prometheus")
        assert binary, f"{OPT_IN}=1 asks for the Prometheus server test: apt-get install -y prometheus"
        config = directory / "prometheus.yml"  # JSON is YAML
        config.write_text(json.dumps(_config(targets, rule_files)))
        self.url = f"http://127.0.0.1:{free_port()}"
        command = [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address={self.url.removeprefix('http://')}",
            "--log.level=warn",
        ]
        super().__init__(command, directory / "prometheus.log")
        self.wait_ready(self._ready, 60, "Prometheus")

    def api(self, path: str, **parameters: str) -> dict:
        """The data of an HTTP API answer (``/api/v1/<path>``), asserted successful."""
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(parameters)}"
        with urllib.request.urlopen(url, timeout=5) as response:
            answer = json.load(response)
        assert answer["status"] == "success", answer
        return answer["data"]

    def query(self, expression: str) -> dict:
        """An instant query's result: {tuple of (label, value) sorted, without __name__: value}."""
        return {
            tuple(sorted((k, v) for k, v in item["metric"].items() if k != "__name__")): float(
                item["value"][1]
            )
            for item in self.api("query", query=expression)["result"]
        }

    def settles(self, expression: str, expected: dict, timeout: float = 60) -> dict:
        """The query's result once it equals `expected`, or after `timeout` (for the assertion to show)."""
        deadline = time.monotonic() + timeout
        while (found := self.query(expression)) != expected and time.monotonic() < deadline:
            time.sleep(0.5)
        return found

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            return True  # exited: the assertion shows its log
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False


def _config(targets: list[Target], rule_files: tuple[Path, ...]) -> dict:
    scrapes = []
    for number, target in enumerate(targets):
        scrape = {
            "job_name": f"target{number}",
            "metrics_path": target.path,
            "static_configs": [{"targets": [target.address]}],
        }
        if target.token:
            scrape["authorization"] = {"type": "Bearer", "credentials": target.token}
        scrapes.append(scrape)
    return {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "scrape_configs": scrapes,
        "rule_files": [str(path) for path in rule_files],
    }
