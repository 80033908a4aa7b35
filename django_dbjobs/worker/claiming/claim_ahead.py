"""ClaimAhead: an idle PostgreSQL worker's claim, sent the moment a notification is read.

Before an idle wait the loop makes its claim ready (arm(): the statement and its values,
as Claimer.claim() would send them now, for the free threads: a prefetch lapses during
the wait); the idle waiter sends it as soon as it reads a notification of new jobs
(send()), and the loop's claim reads what it took (take(), Claimer.claim()) after going
through its turn, which ran meanwhile (db/sent_ahead.py). The paused queues it leaves
out stay true for as long as no notification says they changed (paused_queues.py).

Only where claims run on the LISTEN connection (db/listen.py) and the claim is plain:
no rate-limited queue served here (their claims take turns with the others), no paused
queue among this worker's, nothing in doubt. A claim sent is always read, and what it
took held (as far as slots are free), before the loop waits again and before jobs not
held are given back; at shutdown, given back (ClaimAhead.land()).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ...db.claims_ahead import claimed
from ...models import Job
from ...models.claim_shape import ready_claim

if TYPE_CHECKING:
    from ...db.sent_ahead import Ready, Sent
    from .claimer import Claimer

logger = logging.getLogger("django_dbjobs")


class Flight:
    """A claim sent ahead, not read yet, with the lease epoch read before it was sent and
    how many jobs it asked for."""

    __slots__ = ("sent", "epoch", "limit")

    def __init__(self, sent: Sent, epoch: int, limit: int):
        self.sent = sent
        self.epoch = epoch
        self.limit = limit


class ClaimAhead:
    """The claim of `claimer` a notification sends at once (see above); used by its main thread."""

    def __init__(self, claimer: Claimer):
        self.claimer = claimer
        self._ready: Ready | None = None
        self._limit = 0  # the free slots the claim made ready asks for
        #: The claim sent and not read yet, if any.
        self.flight: Flight | None = None

    def arm(self) -> None:
        """Before an idle wait: make ready the claim a notification sends."""
        self._ready = None
        claimer = self.claimer
        on = claimer.claims_on()
        if on is None or self.flight is not None or claimer.in_doubt or claimer.rated.queues:
            return
        # For the free threads, not the prefetch: a prefetch lapses within a tenth of a second
        # of the last job (prefetch.py), and a claim for more slots than are free when the
        # notification comes could not be sent. The loop's next claim prefetches.
        free = claimer.free_slots(prefetch=False)
        if free <= 0:
            return
        worker = claimer.identity
        waiting = claimer.held.alone is None  # as Claimer.claim() says
        jobs = lambda: Job.objects.using(worker.using)  # noqa: E731
        try:
            # The wait reads every notification before sending it: see paused_queues.py.
            paused = claimer.paused.current(notified=True) | claimer.rated.all_names()
            if claimer.paused.served:
                return
            self._limit = free
            self._ready = ready_claim(
                Job, jobs, worker.using, worker.id, free, worker.queues, waiting, paused, on
            )
        except Exception:  # noqa: BLE001 - the wake-up claims as usual, and meets the error there
            logger.debug("Could not make the wake-up claim ready", exc_info=True)

    def disarm(self) -> None:
        """The wait is over: a claim not sent by then is not sent."""
        self._ready = None

    def send(self) -> None:
        """A notification of new jobs was read: send the claim made ready, if any (the idle
        waiter calls this)."""
        ready, self._ready = self._ready, None
        claimer = self.claimer
        if ready is None or self.flight is not None or claimer.in_doubt:
            return
        if claimer.claims_on() is not ready.connection:  # closed and opened again meanwhile
            return
        # As made ready, or the loop claims as usual: slots for what it asks (--max-jobs
        # reached meanwhile), and the paused queues (a notification said they changed).
        if claimer.free_slots() < self._limit or not claimer.paused.trusted():
            return
        epoch = claimer.lease.epoch  # read before the claim, as Claimer.claim_free_slots() does
        try:
            sent = ready.send()
        except Exception as exc:  # noqa: BLE001 - it may have reached the server all the same
            claimer.in_doubt = True  # what it took goes back before the next claim
            claimer.claim_failed_on(ready.connection, exc)
            logger.warning("Could not send the wake-up claim id=%s: %s", claimer.identity.id, exc)
            return
        self.flight = Flight(sent, epoch, self._limit)

    def take(self) -> Flight | None:
        """The claim sent and not read yet, now the caller's to read (None: there is none)."""
        flight, self.flight = self.flight, None
        return flight

    def read(self, flight: Flight, limit: int) -> list[Job] | None:
        """The jobs `flight` took (taken), at most `limit` of them: fewer slots may be free now
        than when it was sent (a prefetch lapsed), and the rest, last in claim order, go back.
        None if it did not run (claim as usual then). If the LISTEN connection broke under it
        (or gave no answer), None, the claimer in doubt (what it may have committed goes back
        once this turn's claim is held): claims_on() is None now, so the claim runs on the
        worker's own connection."""
        claimer = self.claimer
        try:
            jobs = claimed(Job, claimer.identity.using, flight.sent)
        except Exception as exc:
            if not claimer.claim_failed_on(flight.sent.connection, exc):
                raise  # the statement's error: a failed claim
            claimer.in_doubt = True
            return None
        if jobs is not None and len(jobs) > limit:
            claimer.release(jobs[limit:], quiet=True)
            jobs = jobs[:limit]
        return jobs

    def land(self, release: bool = False) -> None:
        """Read a claim sent that no claim read (the loop did not claim: it is stopping, or has
        no free slot now) and hold and queue what it took, as far as slots are free (the
        rest, last in claim order, goes back); with `release` (shutdown), give all of it
        back. Never raises: a failure leaves the claimer in doubt."""
        flight = self.take()
        if flight is None:
            return
        claimer = self.claimer
        try:
            jobs = self.read(flight, 0 if release else claimer.free_slots())
        except Exception as exc:  # noqa: BLE001 - it may have committed: see Claimer.release_unheld()
            claimer.in_doubt = True
            logger.warning("Could not read the wake-up claim id=%s: %s", claimer.identity.id, exc)
            return
        if jobs:
            claimer.hold(jobs, flight.epoch)
