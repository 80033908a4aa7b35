"""Prefetch: how many jobs a worker claims beyond its free threads."""

from __future__ import annotations

import collections
import threading
import time


class Prefetch:
    """About as many jobs as finished in the last WINDOW seconds, up to `most`.

    Fast jobs get large claims (one round trip feeds many); slow jobs get small ones,
    so a worker never hoards jobs that idle workers could be running.
    """

    #: Seconds of recent completions looked at.
    WINDOW = 0.1

    def __init__(self, most: int):
        if most < 0:
            raise ValueError("prefetch must be 0 or more.")
        self.most = most
        self._finished: collections.deque[float] = collections.deque(maxlen=1000)
        # Job threads append while the loop reads: a deque must not change while iterated.
        self._lock = threading.Lock()

    def job_finished(self) -> None:
        """Note a completion (any thread)."""
        with self._lock:
            self._finished.append(time.monotonic())

    def size(self) -> int:
        """How many jobs to claim beyond the free threads now."""
        horizon = time.monotonic() - self.WINDOW
        recent = 0
        with self._lock:
            for finished in reversed(self._finished):
                if finished < horizon or recent >= self.most:
                    break
                recent += 1
        return recent
