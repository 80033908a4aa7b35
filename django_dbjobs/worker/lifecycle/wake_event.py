"""WakeEvent: the worker's wake-up event, which poll() and select() can also wait for.

An idle worker on PostgreSQL waits for two things at once: its event (set by this
process: a job thread wanting work, an enqueue on commit, a signal) and a NOTIFY on its
LISTEN connection (another process's enqueue). A thread that read the LISTEN socket and
set the event put one more thread hand-off in every wake-up: measured here, about
0.1 ms of the 2 ms between another process's commit and the job's start. So the loop's
thread waits for both in one poll(): the event is also readable, through a socket pair
that holds one byte exactly while the event is set.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class WakeEvent(threading.Event):
    """A threading.Event with a fileno(): readable while it is set.

    The socket pair is made on the first fileno(), so an event nobody polls (a worker on
    SQLite or MySQL) costs no descriptors and no system call per set().
    """

    def __init__(self):
        super().__init__()
        self._lock = threading.Lock()  # keeps the flag and the byte in step
        self._pair: tuple[socket.socket, socket.socket] | None = None
        self._byte = False

    def fileno(self) -> int:
        with self._lock:
            if self._pair is None:
                self._pair = socket.socketpair()
                for end in self._pair:
                    end.setblocking(False)
                if self.is_set():
                    self._send()
            return self._pair[0].fileno()

    def set(self) -> None:
        with self._lock:
            super().set()
            if self._pair is not None and not self._byte:
                self._send()

    def clear(self) -> None:
        with self._lock:
            super().clear()
            if self._byte:
                self._byte = False
                with contextlib.suppress(OSError):  # BlockingIOError once empty
                    while self._pair[0].recv(64):
                        pass

    def close(self) -> None:
        """Free the socket pair; the event still works as a threading.Event after it."""
        with self._lock:
            if self._pair is not None:
                for end in self._pair:
                    end.close()

    def _send(self) -> None:
        self._byte = True
        with contextlib.suppress(OSError):  # closed: the worker is gone
            self._pair[1].send(b"\0")
