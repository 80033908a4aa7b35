"""RatedQueues: a worker's claims from its rate-limited queues (DBJOBS_QUEUE_LIMITS)."""

from __future__ import annotations

import logging
import time

from ...flow.rates import Rate, RateLimitedClaims, queue_rates, sync_blocked
from ...models import Isolation, Job
from ...observability import log_fields
from ..identity import Identity

logger = logging.getLogger("django_dbjobs")

#: Seconds between a worker's passes applying DBJOBS_QUEUE_LIMITS to the waiting jobs.
SYNC_INTERVAL = 60.0


class RatedQueues:
    """The rate-limited queues a worker serves, and its claims from them (its main thread)."""

    def __init__(self, identity: Identity):
        self.using = identity.using
        self.served = set(identity.queues)  # empty: every queue
        self.claims = RateLimitedClaims(identity.id, identity.using)
        self._turn = 0  # which queue goes first (claim())
        self._rated_first = False  # first_this_time()
        self._next_sync = time.monotonic() + SYNC_INTERVAL  # the worker's start did the first

    @property
    def queues(self) -> dict[str, Rate]:
        """The rate-limited queues this worker claims from, with their rates."""
        rates = queue_rates()
        return {q: r for q, r in rates.items() if not self.served or q in self.served}

    def alone_due(self) -> bool:
        """Whether a due job that must run alone waits in a rate-limited queue this worker serves:
        claimed only by a worker that holds nothing (RateLimitedClaims.alone_due)."""
        due = self.claims.alone_due
        if due and not due & set(self.queues):
            due.clear()  # queues no longer rate-limited, or no longer served
        return bool(due)

    def all_names(self) -> frozenset[str]:
        """Every rate-limited queue of the setting, served here or not."""
        return frozenset(queue_rates())

    def first_this_time(self) -> bool:
        """Whether this claim takes from the rate-limited queues before the others (every other one)."""
        self._rated_first = not self._rated_first
        return self._rated_first

    def claim(self, limit: int, paused: frozenset[str], nothing_held: bool) -> list[Job]:
        """Claim up to `limit` jobs from the rate-limited queues, within their rates.

        The queues take turns at going first, so one with a backlog never takes every free
        thread from the others. A job that must run alone is taken only when the worker
        holds nothing else: it would wait at the gate, its rate slot stamped.
        """
        jobs: list[Job] = []
        queues = [(q, r) for q, r in self.queues.items() if q not in paused]
        if not queues:
            return jobs
        self._turn = (self._turn + 1) % len(queues)
        in_turn = queues[self._turn :] + queues[: self._turn]
        # A queue with a job that must run alone goes first while nothing is held (a drain).
        in_turn.sort(key=lambda item: item[0] not in self.claims.alone_due)
        for queue, rate in in_turn:
            if limit - len(jobs) <= 0:
                break
            alone_ok = nothing_held and not jobs
            jobs += self.claims.claim(queue, rate, limit - len(jobs), alone_ok)
            if any(job.isolation != Isolation.NONE for job in jobs):
                break  # claimed by itself: nothing beside it
        return jobs

    def sync_if_due(self, call) -> None:
        """Apply the setting to waiting jobs every SYNC_INTERVAL (rates.sync_blocked()), through
        `call` (the worker's outage policy, once)."""
        now = time.monotonic()
        if now < self._next_sync:
            return
        self._next_sync = now + SYNC_INTERVAL
        try:
            moved = call(lambda: sync_blocked(self.using), "applying DBJOBS_QUEUE_LIMITS", once=True)
        except Exception:  # noqa: BLE001 - the loop goes on; the next pass tries again
            logger.exception("Could not apply DBJOBS_QUEUE_LIMITS to waiting jobs")
            return
        if moved:
            logger.info(
                "Jobs moved in or out of rate-limited queues' waiting line count=%s",
                moved,
                extra=log_fields.for_count(moved),
            )
