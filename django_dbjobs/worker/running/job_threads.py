"""JobThreads: the worker's threads that run claimed jobs, each on its own connection."""

from __future__ import annotations

import logging
import queue as queue_module
import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError, InterfaceError, connections

from ...db.outage import Outage
from ...models import Isolation, Job
from ...observability import log_fields
from ..identity import DatabaseErrors, Identity
from ..leases.lease import Lease
from . import execution

logger = logging.getLogger("django_dbjobs")

#: A thread whose connection sat unused this long checks it before the next job
#: (a MySQL wait_timeout, a firewall dropping idle connections).
IDLE_CHECK_SECONDS = 10.0


class AloneGate:
    """Start a job that must run alone only when no other job runs; hold the others back meanwhile.

    So when a worker dies during such a run, the job it was running alone is the only
    job that can have killed it (models.Isolation). A worker holds at most one of them.
    The main thread announces it (expect_alone()) before queueing it, so every job a
    thread takes after that is held back, wherever it is in the queue, until it is done.
    A job held back is set aside, never waited for on its thread: threads all waiting
    with jobs held back would leave none to run the one that must run alone, queued
    behind them (a worker that hung for good, heartbeating).
    """

    def __init__(self, requeue: Callable[[Job], None]):
        #: Queues a job set aside again (for the threads to take), once the job alone is done.
        self.requeue = requeue
        self._changed = threading.Condition()
        self._others = 0
        self._alone = False  # one is queued, waiting for the others to finish, or running
        self._waiting: list[Job] = []  # the job that must run alone, until the others end
        self._set_aside: list[Job] = []  # held back until it is done: leave() hands them back
        self._closed = False

    def expect_alone(self) -> None:
        with self._changed:
            self._alone = True

    def enter(self, job: Job, alone: bool) -> bool:
        """Wait until `job` may start, if it must run alone; True if it may start now.

        False if it may not: the gate closed (shutdown: it is given back), or `job` was
        set aside until the job that must run alone is done (leave() queues it again).
        """
        with self._changed:
            if self._closed:
                return False  # still held: released with the others at the end of the grace
            if not alone:
                if self._alone:
                    self._set_aside.append(job)
                    return False
                self._others += 1
                return True
            if self._others:
                self._waiting.append(job)  # close() hands it back from here
                self._changed.wait_for(lambda: self._closed or self._others == 0)
                self._waiting.remove(job)
            return not self._closed

    def close(self) -> list[Job]:
        """Let no more jobs start (shutdown); return the jobs that were waiting to, or set aside."""
        with self._changed:
            self._closed = True
            waiting = self._waiting + self._set_aside
            self._set_aside = []
            self._changed.notify_all()
            return waiting

    def withdraw(self, taken: list[Job]) -> list[Job]:
        """Jobs taken out of the queue unstarted (`taken`): forget the one that must run alone
        if it is among them (submit() announces it again), and return the jobs set aside."""
        with self._changed:
            if any(job.isolation != Isolation.NONE for job in taken):
                self._alone = False
            set_aside, self._set_aside = self._set_aside, []
            return set_aside

    def leave(self, alone: bool) -> None:
        """A job is done (or was not started); after the job alone, queue the jobs set aside again.

        Under the gate's lock, so that a shutdown's close() finds each either set aside or queued.
        """
        with self._changed:
            if alone:
                self._alone = False
                set_aside, self._set_aside = self._set_aside, []
                if not self._closed:
                    for job in set_aside:
                        self.requeue(job)
            else:
                self._others -= 1
            self._changed.notify_all()


class JobThreads:
    """Run jobs submitted by the worker's loop on `count` threads, in submission order.

    What they need of the rest of the worker comes in as arguments: the `lease` they
    ask before starting a prefetched job, `on_success` (the success batch: success_batch.py),
    `on_done(job, seconds)` once a thread is done with a job (None: it did not run),
    `on_not_stored()` when an outcome could not be stored, the `errors` count they
    watch, the loop's `wake` event (set when fewer jobs wait than there are threads,
    unless `claims_came_short()`), and `forced` (stop at once).
    """

    def __init__(
        self,
        identity: Identity,
        count: int,
        *,
        lease: Lease,
        on_success: Callable[[Job, Any], None],
        on_done: Callable[[Job, float | None], None],
        on_not_stored: Callable[[], None],
        errors: DatabaseErrors,
        wake: threading.Event,
        forced: threading.Event,
        claims_came_short: Callable[[], bool],
    ):
        self.identity = identity
        self.count = count
        self.lease = lease
        self.on_success = on_success
        self.on_done = on_done
        self.on_not_stored = on_not_stored
        self.errors = errors
        self.wake = wake
        self.forced = forced
        self.claims_came_short = claims_came_short
        self._tasks: queue_module.SimpleQueue[Job | None] = queue_module.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._gate = AloneGate(self._tasks.put)

    def start(self) -> None:
        """Start the threads; they run jobs as they are submitted."""
        for n in range(self.count):
            thread = threading.Thread(target=self._work, name=f"dbjobs-worker-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def submit(self, jobs: list[Job], epoch: int | None) -> None:
        """Queue claimed jobs for the threads, with the lease epoch they were claimed or checked in.

        With `epoch` None, each job keeps the epoch it had (a job put back unchecked).
        """
        for job in jobs:
            if epoch is not None:
                job._lease_epoch = epoch
            if job.isolation != Isolation.NONE:
                self._gate.expect_alone()
            self._tasks.put(job)

    def queued(self) -> int:
        """Jobs submitted that no thread has started yet."""
        return self._tasks.qsize()

    def take_unstarted(self, close: bool = False) -> list[Job]:
        """Take back every job no thread has started; with `close`, start no more (shutdown).

        Closing also takes back the jobs threads have taken but are holding at the gate.
        """
        held_back = self._gate.close() if close else []  # closed first: none starts meanwhile
        queued = []
        while True:
            try:
                job = self._tasks.get_nowait()
            except queue_module.Empty:
                break
            if job is not None:
                queued.append(job)
        if not close:
            held_back = self._gate.withdraw(queued)
        return held_back + queued

    def stop(self) -> None:
        """Let each thread end once it is done with its current job."""
        for _ in self._threads:
            self._tasks.put(None)

    def _take(self) -> Job | None:
        """The next job, once the gate lets it start (None: no more jobs)."""
        while (job := self._tasks.get()) is not None:
            if self._tasks.qsize() == self.count - 1 and not self.claims_came_short():
                # Fewer jobs wait than there are threads, from now on: the loop may claim more
                # while this one runs (claim_free_slots() claims nothing while enough wait).
                # Not when its last claim found fewer due jobs than it asked for: there is
                # nothing to claim ahead, and new jobs wake it themselves.
                self.wake.set()
            if self._gate.enter(job, job.isolation != Isolation.NONE):
                return job
            # Set aside until the job that must run alone is done, or the gate closed
            # (shutdown: it is given back by take_unstarted(), or with the held jobs at the
            # end of the grace). Either way this thread takes the next job.
        return None

    def _work(self) -> None:
        outage = Outage(self.identity.using, on_error=self.errors.note, forced=self.forced)
        errors_seen = self.errors.count
        last_job = time.monotonic()
        try:
            while (job := self._take()) is not None:
                alone = job.isolation != Isolation.NONE
                began = None
                try:
                    if errors_seen != self.errors.count or time.monotonic() - last_job > IDLE_CHECK_SECONDS:
                        errors_seen = self.errors.count
                        check_connections()
                    if self.lease.may_start(job):
                        began = time.monotonic()
                        execution.run(job, self.identity.id, on_success=self.on_success, outage=outage)
                except BaseException:  # noqa: B036 - a job thread must never die
                    logger.exception(
                        "Could not store the outcome of job id=%s; it will be given back",
                        job.pk,
                        extra=log_fields.for_job(job),
                    )
                    not_stored = True
                else:
                    not_stored = False
                finally:
                    self._gate.leave(alone)
                    last_job = time.monotonic()
                    self.on_done(job, None if began is None else last_job - began)
                if not_stored:  # after on_done(): the job is no longer held, so it is given back
                    self.on_not_stored()
        finally:
            connections.close_all()


def check_connections() -> None:
    """Close this thread's connections that no longer answer, as Django does between requests.

    After a database restart a job's first query would otherwise fail and cost it an
    attempt; a closed connection is opened again when the job next uses it.
    """
    for connection in connections.all(initialized_only=True):
        if connection.connection is None:
            continue
        try:
            usable = connection.is_usable()
        except (DatabaseError, InterfaceError):
            usable = False
        if not usable:
            connection.close()
