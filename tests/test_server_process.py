"""The server processes tests start (tests/server_process.py): one that never gets ready is stopped."""

import sys

import pytest

from tests.server_process import ServerProcess


def test_a_server_that_never_gets_ready_is_stopped_and_its_log_closed(tmp_path):
    started = []

    class NeverReady(ServerProcess):
        def __init__(self):
            super().__init__([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "log")
            started.append(self)
            self.wait_ready(lambda: False, 0.2, "NeverReady")

    with pytest.raises(AssertionError, match="NeverReady did not start"):
        NeverReady()
    (server,) = started
    assert server.process.poll() is not None, "the process is not left running"
    assert server.log.closed
