"""Identity: who a worker is (its id, database, queues), and the database errors its threads watch."""

from __future__ import annotations

import os
import secrets
import socket
import threading
from dataclasses import dataclass


def new_worker_id() -> str:
    """An identity unique to this process start, even where hostname and pid repeat."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{secrets.token_hex(4)}"


@dataclass(frozen=True)
class Identity:
    """What every part of a worker needs to know of it: its id, its database alias, its queues."""

    id: str
    using: str
    #: The queues it serves; empty: all of them.
    queues: tuple[str, ...] = ()


class DatabaseErrors:
    """How many database errors the worker has met; a job thread checks its connections when it moves."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def note(self) -> None:
        with self._lock:
            self.count += 1
