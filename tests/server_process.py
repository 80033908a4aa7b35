"""A server process a test starts (Prometheus, PgBouncer), its output in a log; stopped by its starter."""

import subprocess
from pathlib import Path


class ServerProcess:
    """Run `command`, its output (stdout and stderr) to the file `log`."""

    def __init__(self, command: list[str], log: Path):
        self.log = log.open("w+")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)

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
