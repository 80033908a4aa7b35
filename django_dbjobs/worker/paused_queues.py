"""PausedQueues: a worker's view of the queues an operator paused, read at most once a second."""

from __future__ import annotations

import logging
import time

from ..models import Queue

logger = logging.getLogger("django_dbjobs")

#: Seconds a worker trusts its list of paused queues: a pause takes effect within this.
PAUSE_CHECK_INTERVAL = 1.0


class PausedQueues:
    """The paused queues, for the claims of one worker (its main thread)."""

    def __init__(self, worker_id: str, using: str, queues: list[str] | None = None):
        self.worker_id = worker_id
        self.using = using
        self.queues = set(queues or [])  # empty: every queue
        self.names: frozenset[str] = frozenset()
        self._read_at: float | None = None

    def current(self) -> frozenset[str]:
        """The paused queues, read again when the last read is a second old.

        Raises the database's error if the read fails: the claim that asked fails with it.
        """
        now = time.monotonic()
        if self._read_at is None or now - self._read_at >= PAUSE_CHECK_INTERVAL:
            names = frozenset(Queue.objects.using(self.using).paused().values_list("name", flat=True))
            self._read_at = now
            if names != self.names:
                self._log_change(names)
                self.names = names
        return self.names

    def fresh(self) -> bool:
        """Whether current() would answer without reading the database again."""
        return self._read_at is not None and time.monotonic() - self._read_at < PAUSE_CHECK_INTERVAL

    @property
    def served(self) -> frozenset[str]:
        """The paused queues among those this worker claims from (as last read)."""
        return self.names & self.queues if self.queues else self.names

    def _log_change(self, names: frozenset[str]) -> None:
        def served(name: str) -> bool:
            return not self.queues or name in self.queues

        for name in sorted(filter(served, names - self.names)):
            logger.info("Queue paused, not claiming from it queue=%s id=%s", name, self.worker_id)
        for name in sorted(filter(served, self.names - names)):
            logger.info("Queue resumed queue=%s id=%s", name, self.worker_id)
