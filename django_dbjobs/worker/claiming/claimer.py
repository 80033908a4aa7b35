"""Claimer: how many jobs a worker takes, taking them, and giving back what it must not hold."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ...db.outage import Outage
from ...exceptions import MissingMigrations
from ...models import Isolation, Job
from ...models.claim_shape import claim
from ...observability import log_fields
from ..identity import Identity
from ..leases.lease import Lease
from ..running import cancel_watch
from ..running.job_threads import JobThreads
from ..running.success_batch import SuccessBatch
from .held import HeldJobs
from .paused_queues import PausedQueues
from .prefetch import Prefetch
from .rated_queues import RatedQueues

logger = logging.getLogger("django_dbjobs")

#: Seconds between claims that come back empty while queues are paused. A paused
#: backlog sits in the claim index before other jobs, and every claim walks past it;
#: wake-ups (another process's enqueue into the paused queue) must not repeat that walk
#: many times a second. Other queues' new jobs may wait this long.
PAUSED_CLAIM_GAP = 0.2


class Claimer:
    """The claims of one worker, made by its main thread.

    Claims only when threads are about to run out of work, so each claim fills many
    slots in one round trip. After a claim that failed (it may have committed all the
    same), a release that failed, or an outcome the database refused, `in_doubt` is
    set (job threads may set it too): at its next turn, free slot or not, the worker
    gives back every job it owns in the database but does not hold (release_unheld()).
    """

    def __init__(
        self,
        identity: Identity,
        *,
        concurrency: int,
        max_jobs: int | None,
        prefetch: Prefetch,
        held: HeldJobs,
        threads: JobThreads,
        lease: Lease,
        acks: SuccessBatch,
        outage: Outage,
        forced: threading.Event,
        poll_interval: float,
    ):
        self.identity = identity
        self.concurrency = concurrency
        self.max_jobs = max_jobs
        self.prefetch = prefetch
        self.held = held
        self.threads = threads
        self.lease = lease
        self.acks = acks
        self.outage = outage
        self.forced = forced
        self.poll_interval = poll_interval
        self.in_doubt = False
        self.claimed = 0
        self.paused = PausedQueues(identity.id, identity.using, list(identity.queues))
        self.rated = RatedQueues(identity)
        self._came_empty_at = float("-inf")
        #: The last claim found fewer due jobs than it asked for.
        self.came_short = False
        #: This turn's claim follows an idle wait that read every notification that had come.
        self._woken = False
        #: Where claims run (the idle waiter's, once the loop starts: IdleWaiter.claims_on):
        #: PostgreSQL's LISTEN connection while it is open, else None (the worker's own).
        self.claims_on: Callable[[], Any] = lambda: None
        #: Told of a claim that failed on that connection: True if the connection broke (it is
        #: closed, and opened again later).
        self.claim_failed_on: Callable[[Any, Exception], bool] = lambda connection, exc: False

    def free_slots(self, prefetch: bool = True) -> int:
        """Jobs to claim now: free threads plus the prefetch (unless not `prefetch`), within --max-jobs."""
        if self.threads.queued() >= self.concurrency:
            return 0
        free = self.concurrency + (self.prefetch.size() if prefetch else 0) - len(self.held)
        if self.max_jobs is not None:
            free = min(free, self.max_jobs - self.claimed)
        return max(free, 0)

    def claim_free_slots(self, woken: bool = False) -> int | None:
        """Claim due jobs for the free slots; return how many, None after an error (already paused).

        `woken`: right after an idle wait, which read every notification that had come: the
        paused queues are read again only if those do not vouch for them (paused_queues.py).
        """
        self.came_short = False
        if self.in_doubt and not self._give_back_unheld():
            return None
        free = self.free_slots()
        if free <= 0:
            return 0
        paused = self.paused
        if paused.served and not paused.unread and time.monotonic() - self._came_empty_at < PAUSED_CLAIM_GAP:
            return 0  # see PAUSED_CLAIM_GAP (not when a queue was just paused or resumed)
        epoch = self.lease.epoch  # read before the claim: see Lease
        self._woken = woken
        try:
            jobs = self._claim_both(free)
        finally:
            self._woken = False
        if jobs is None:
            return None
        if not jobs:
            self._came_empty_at = time.monotonic()
        held = self.hold(jobs, epoch)
        if self.in_doubt:  # a claim of this turn broke its LISTEN connection: what it claimed is held now
            self._give_back_unheld()
        return len(held)

    def _give_back_unheld(self) -> bool:
        """release_unheld() through the outage policy; False (still in doubt) if it failed."""
        self.in_doubt = False  # cleared first: a job thread may set it again meanwhile
        if self._guarded(self.release_unheld, "releasing jobs not held") is None:
            self.in_doubt = True
            return False
        return True

    def hold(self, jobs: list[Job], epoch: int) -> list[Job]:
        """Hold claimed `jobs` and queue them for the threads; return those queued."""
        was_idle = not self.held
        extra = self.held.add(jobs)
        if extra:  # hold one job that must run alone at a time; give the others back now
            self.release(extra, quiet=True)
            jobs = [job for job in jobs if job not in extra]
        self.threads.submit(jobs, epoch)
        if was_idle and jobs:
            # A wake-up: let a job thread take the interpreter now rather than when this loop
            # next blocks (0.1 ms). Not on every claim: yielding the CPU after each one costs
            # many processes sharing few cores a third of their throughput.
            time.sleep(0)
        self.claimed += len(jobs)
        return jobs

    def _claim_both(self, free: int) -> list[Job] | None:
        """Claim from the rate-limited queues (rated_queues.py) and the others, taking turns at
        going first, so that neither starves the other of free threads; None after an error.

        A rate-limited job is claimed only to start at once: never beside a job that must run
        alone (held, or claimed this turn), at whose gate it would wait with its rate slot
        stamped. The rate counts starts, not claims.
        """
        rated: list[Job] = []
        ordinary: list[Job] | None = []
        rated_first = self.rated.first_this_time()
        if self.rated.alone_due():
            # A rate-limited job that must run alone is due: it is claimed only by a worker
            # holding nothing (its rate slot must not be stamped while it waits at the gate).
            # Claim nothing until the jobs held are done, then it first: a drain, as long as
            # the jobs running last, once per such job (recovered from a dead worker).
            if self.held:
                return []
            rated_first = True
        if not rated_first:
            ordinary = self._guarded(lambda: self.claim(free), "claiming jobs")
            if ordinary is None:
                self.in_doubt = True
                return None
        threads_free = min(free - len(ordinary), self.concurrency - len(self.held) - len(ordinary))
        if threads_free > 0 and self.rated.queues and self.held.alone is None and not _alone(ordinary):
            # Never into the prefetch (a start must follow its claim closely).
            nothing_held = not self.held and not ordinary
            rated = self._guarded(
                lambda: self.rated.claim(threads_free, self.paused.current(), nothing_held=nothing_held),
                "claiming rate-limited jobs",
            )
            if rated is None:
                self.in_doubt = True  # it may have committed all the same: see release_unheld()
                rated = []
        if rated_first and not rated and self.rated.alone_due() and not self.held:
            return []  # still draining: its rate had no free slot yet
        if rated_first and free > len(rated):
            ordinary = self._guarded(
                lambda: self.claim(free - len(rated), alone_ok=not rated), "claiming jobs"
            )
            if ordinary is None:
                self.in_doubt = True
                if not rated:
                    return None
                ordinary = []
        self.came_short = len(ordinary) + len(rated) < free
        return [*rated, *ordinary]

    def claim(self, limit: int, alone_ok: bool = True) -> list[Job]:
        """Claim up to `limit` due jobs outside the rate-limited queues; one that must run alone
        only if `alone_ok` and none is held."""
        worker = self.identity
        waiting = alone_ok and self.held.alone is None  # one job that must run alone at a time
        # A rate-limited queue's jobs are claimed within its rate only; left out here, in case
        # one was enqueued by a process without DBJOBS_QUEUE_LIMITS (see rates.sync_blocked()).
        paused = self.paused.current(notified=self._woken) | self.rated.all_names()
        using = worker.using
        on = self.claims_on()

        def claim_on(connection) -> list[Job]:
            jobs = lambda: Job.objects.using(using)  # noqa: E731
            queues = worker.queues
            return claim(Job, jobs, using, worker.id, limit, queues, waiting, paused, unsorted=connection)

        if on is None:
            return claim_on(None)
        try:
            return claim_on(on)
        except Exception as exc:
            if not self.claim_failed_on(on, exc):
                raise  # the statement's error, or the worker's own connection's: a failed claim
        # Only the LISTEN connection broke (a pooler's idle timeout, pg_terminate_backend): no
        # outage. It may have committed all the same: jobs not held go back once all this turn
        # claimed is held (claim_free_slots(): rate-limited jobs claimed first are not yet).
        self.in_doubt = True
        return claim_on(None)

    def _guarded(self, action, what: str):
        """Run `action` once through the outage policy; any other error is logged, never fatal."""
        try:
            return self.outage.call(action, what, once=True)
        except MissingMigrations:
            raise
        except Exception:  # noqa: BLE001 - not an outage, yet the loop must go on
            logger.exception("Unexpected error while %s id=%s", what, self.identity.id)
            self.forced.wait(self.poll_interval)  # not the wake event: it may be set already
            return None

    def release_unheld(self) -> int:
        """Give back jobs this worker owns in the database but does not hold.

        A claim can commit while its answer is lost (the connection broke after the
        COMMIT): those rows are RUNNING under a live, heartbeating worker, so no sweep
        would ever recover them. What stays is in HeldJobs.kept(). One that commits later
        still: see reconcile.py.
        """
        worker = self.identity
        held = self.held.kept(self.acks.pending_ids)
        released, cancelled = Job.objects.using(worker.using).release_unheld(worker.id, held)
        if released or cancelled:
            logger.warning(
                "Jobs this worker did not hold released count=%s id=%s",
                released + len(cancelled),
                worker.id,
                extra=log_fields.for_count(released + len(cancelled)),
            )
        cancel_watch.report_cancelled(worker.using, cancelled)  # asked to stop: recorded cancelled instead
        return released + len(cancelled)

    def release(self, jobs: list[Job], quiet: bool = False) -> None:
        """Give unfinished jobs back in one fenced UPDATE: READY, attempts refunded (or cancelled,
        if asked to stop: models/cancelling.py)."""
        if not jobs:
            return
        worker = self.identity
        try:
            gave = self.outage.call(
                lambda: Job.objects.using(worker.using).give_back(worker.id, jobs), "releasing jobs"
            )
        except Exception as exc:  # noqa: BLE001 - not an outage: release_unheld() retries
            gave = None
            logger.error("Could not release jobs id=%s: %s", worker.id, exc)
        released, cancelled = (None, []) if gave is None else (gave[0] + len(gave[1]), gave[1])
        if released is None:
            self.in_doubt = True  # still ours in the database: give them back later
        self.held.remove(jobs)
        for job in cancelled:  # asked to stop: recorded cancelled, not given back
            cancel_watch.given_back_cancelled(job)
        (logger.debug if quiet else logger.warning)(
            "Jobs released unfinished count=%s released=%s ids=%s",
            len(jobs),
            released,
            ",".join(job.pk for job in jobs),
            extra=log_fields.for_count(len(jobs)),
        )


def _alone(jobs: list[Job]) -> list[Job]:
    """The jobs of `jobs` that must run alone (models.Isolation)."""
    return [job for job in jobs if job.isolation != Isolation.NONE]
