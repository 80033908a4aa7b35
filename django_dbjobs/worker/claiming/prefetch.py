"""Prefetch: how many jobs a worker claims beyond its free threads."""

from __future__ import annotations

import threading
import time


class Prefetch:
    """About as many jobs as the worker's threads run in WINDOW seconds, up to `most`.

    Fast jobs get large claims (one round trip feeds many); slow jobs get small ones,
    so a worker never hoards more than about WINDOW seconds of work that idle workers
    could be running. A worker that has finished nothing lately (it was idle, or its
    jobs are slow) claims only for its free threads.

    The pace is the time each job took on its thread, not the rate the worker finished
    them: a process that shares its cores with many others finishes few jobs per tenth
    of a second, and sizing claims by that rate made them small, each small claim's
    round trip cost it more, and its rate fell further (16 processes on 2 cores drained
    at about half the speed of 2 until the pace was measured this way).
    """

    #: Seconds of work claimed ahead.
    WINDOW = 0.1
    #: Weight of the latest job in the running mean of the pace.
    WEIGHT = 0.1

    def __init__(self, most: int, threads: int = 1):
        if most < 0:
            raise ValueError("prefetch must be 0 or more.")
        self.most = most
        self.threads = threads
        self._pace: float | None = None  # seconds per job on its thread, a running mean
        self._last = float("-inf")  # when a job last finished (monotonic)
        self._lock = threading.Lock()  # job threads report while the loop reads

    def job_finished(self, seconds: float) -> None:
        """Note a job that ran `seconds` on its thread (any thread)."""
        with self._lock:
            pace = self._pace
            self._pace = seconds if pace is None else pace + (seconds - pace) * self.WEIGHT
            self._last = time.monotonic()

    def size(self) -> int:
        """How many jobs to claim beyond the free threads now."""
        with self._lock:
            pace, last = self._pace, self._last
        if pace is None or time.monotonic() - last > max(self.WINDOW, 2 * pace):
            return 0
        return min(self.most, int(self.WINDOW * self.threads / max(pace, 1e-6)))
