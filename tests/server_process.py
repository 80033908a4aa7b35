"""Running a server for tests or bench (Prometheus, PgBouncer): a free port, a wait, its process and log."""

import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(predicate, timeout: float = 20, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


class ServerProcess:
    """Run `command`, its output (stdout and stderr) to the file `log`."""

    def __init__(self, command: list[str], log: Path):
        self.log = log.open("w+")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, ready: Callable[[], bool], timeout: float, name: str) -> None:
        """Wait until `ready()`; if it never is (or raises), stop the process, close the log, and
        fail: the caller is still in __init__, so nobody else would stop it."""
        try:
            assert wait_for(ready, timeout), f"{name} did not start:\n{self.output()}"
        except BaseException:
            self.stop()
            raise

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
