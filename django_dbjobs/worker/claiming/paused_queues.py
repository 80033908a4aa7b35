"""PausedQueues: a worker's view of the queues an operator paused, read at most once a second.

On PostgreSQL a trigger NOTIFYs workers when a queue is paused or resumed (db/triggers.py).
A list read while the worker's LISTEN session was open stays true for as long as that
session lasts and brings no such notification: a pause committed after the read is
notified in it. An idle worker's wake-up claim, made right after its wait read every
notification that had come (Claimer.claim_free_slots(woken=True)), trusts such a list up
to a minute old (trusted()); otherwise the first wake-up after a second idle would read
the paused queues before claiming. Only where the trigger fires (the LISTEN connection
looks when it connects), and for a minute at most: a write made with triggers off
(``session_replication_role``) notifies nobody. The loop's other claims read them every
second as before (a worker claiming without pause reads no notification meanwhile), and
before the next claim once a notification said they changed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ...models import Queue

logger = logging.getLogger("django_dbjobs")

#: Seconds a worker trusts its list of paused queues: a pause takes effect within this.
PAUSE_CHECK_INTERVAL = 1.0
#: Seconds an idle PostgreSQL worker's wake-up claim trusts a list its LISTEN session vouches for.
HEARD_TRUST_LONGEST = 60.0


class PausedQueues:
    """The paused queues, for the claims of one worker (its main thread)."""

    def __init__(self, worker_id: str, using: str, queues: list[str] | None = None):
        self.worker_id = worker_id
        self.using = using
        self.queues = set(queues or [])  # empty: every queue
        self.names: frozenset[str] = frozenset()
        self._read_at: float | None = None
        #: The LISTEN session open now, or None (PostgreSQL: the worker sets it, idle_wait.py).
        self.listen_session: Callable[[], int | None] = lambda: None
        #: The LISTEN session the list was read in, while no notification said it changed.
        self._read_in: int | None = None

    def current(self, notified: bool = False) -> frozenset[str]:
        """The paused queues, read again when the last read is a second old; with `notified`,
        only when not trusted() (the caller reads the LISTEN connection before using them).

        Raises the database's error if the read fails: the claim that asked fails with it.
        """
        now = time.monotonic()
        if notified and self.trusted():
            return self.names
        if self._read_at is None or now - self._read_at >= PAUSE_CHECK_INTERVAL:
            session = self.listen_session()  # before the read: a change after it is heard there
            names = frozenset(Queue.objects.using(self.using).paused().values_list("name", flat=True))
            self._read_at, self._read_in = now, session
            if names != self.names:
                self._log_change(names)
                self.names = names
        return self.names

    def trusted(self) -> bool:
        """Whether the list is true now, as far as the notifications read so far tell: read
        under a second ago, or under a minute ago in the LISTEN session still open, with no
        change heard since."""
        if self._read_at is None:
            return False
        age = time.monotonic() - self._read_at
        if age < PAUSE_CHECK_INTERVAL:
            return True
        return (
            age < HEARD_TRUST_LONGEST and self._read_in is not None and self._read_in == self.listen_session()
        )

    def changed(self) -> None:
        """A queue was paused or resumed (a notification): read them again before the next claim."""
        self._read_at = self._read_in = None

    @property
    def unread(self) -> bool:
        """Never read, or said to have changed since (changed()): the next claim reads them."""
        return self._read_at is None

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
