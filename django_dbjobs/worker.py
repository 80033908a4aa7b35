"""Worker: the run_jobs loop. Claims due jobs, runs them on threads, shuts down gracefully."""

from __future__ import annotations

import logging
import os
import secrets
import signal
import socket
import threading
import time

from django.db import DatabaseError, InterfaceError, connections

from . import db, registry, wakeup
from .acks import SuccessBatch
from .conf import settings
from .exceptions import MissingMigrations
from .heartbeat import Heartbeat
from .held import HeldJobs
from .job_threads import JobThreads
from .lease import Lease
from .models import Job, WorkerProcess
from .outage import Outage
from .prefetch import Prefetch
from .stop_signals import StopSignals
from .sweep import Sweeper

logger = logging.getLogger("django_dbjobs")


def new_worker_id() -> str:
    """An identity unique to this process start, even where hostname and pid repeat."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{secrets.token_hex(4)}"


class Worker:
    """Claim due jobs and run them on `concurrency` threads until told to stop.

    The main thread claims, stores batched successes, sweeps and shuts down; job
    threads (job_threads.py) run jobs. A claimed job is held (held.py) from its claim
    until its thread is done with it (outcome stored, or handed to the success
    batch, which the main thread stores, so _release_unheld() reads the two in that
    order). At most one held job at a time is one that must run alone.
    """

    def __init__(
        self,
        queues: list[str] | None = None,
        concurrency: int = 1,
        burst: bool = False,
        max_jobs: int | None = None,
        poll_interval: float | None = None,
        shutdown_grace: float | None = None,
        prefetch: int | None = None,
        using: str = "default",
    ):
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1.")
        if max_jobs is not None and max_jobs < 1:
            raise ValueError("max_jobs must be at least 1.")
        self.prefetch = Prefetch(settings.PREFETCH if prefetch is None else prefetch)
        self.queues = list(queues or [])
        self.concurrency = concurrency
        self.burst = burst
        self.max_jobs = max_jobs
        self.poll_interval = settings.POLL_INTERVAL if poll_interval is None else poll_interval
        self.shutdown_grace = settings.SHUTDOWN_GRACE if shutdown_grace is None else shutdown_grace
        self.using = using
        self.id = new_worker_id()
        self.claimed = 0
        self._held = HeldJobs()
        self._wake = threading.Event()
        self._stopping = False
        self._forced = threading.Event()
        self.lease = Lease(self)
        self._heartbeat: Heartbeat | None = None
        self._sweeper = Sweeper(self.id, using)
        self._outage = Outage(using, on_error=self._database_error, forced=self._forced, wake=self._wake)
        self._acks = SuccessBatch(self.id, using, self._wake, self._outage)
        self._threads = JobThreads(self, concurrency)
        # A claim failed: it may have committed all the same (see _release_unheld).
        self._claim_in_doubt = False
        #: Database errors seen so far; job threads check their connections when it moves.
        self.database_errors = 0

    # Lifecycle

    def run(self) -> None:
        """Work until stopped (signal, --burst drained, or --max-jobs reached)."""
        db.ensure_supported(self.using)
        registry.autodiscover()
        signals = StopSignals(self._on_signal)
        signals.install()  # before any thread starts: see stop_signals.py
        wakeup.subscribe(self._wake)
        self._waiter = wakeup.IdleWaiter(self.using, self._wake, self.queues)
        try:
            self._outage.call(self._check_migrated, "checking the database")
            self._waiter.start()
            self._outage.call(self._register, "registering the worker")
            self._heartbeat = Heartbeat(
                self.id,
                settings.HEARTBEAT_INTERVAL,
                self._register,
                self.using,
                on_error=self._database_error,
                on_lost=self.lease.lost,
            )
            self.lease.heartbeat = self._heartbeat
            self._heartbeat.start()
            self._threads.start()
            logger.info(
                "Worker started id=%s queues=%s threads=%s registered_jobs=%s prefetch_max=%s",
                self.id,
                ",".join(self.queues) or "*",
                self.concurrency,
                len(registry.registered()),
                self.prefetch.most,
            )
            self._loop()
        finally:
            self._shutdown()
            self._waiter.stop()
            wakeup.unsubscribe(self._wake)
            signals.uninstall()

    def stop(self) -> None:
        """Ask the worker to stop claiming and finish; a second call stops at once."""
        if self._stopping:
            self._forced.set()
        self._stopping = True
        self._wake.set()

    @property
    def forced(self) -> bool:
        return self._forced.is_set()

    def _on_signal(self, signum: int) -> None:
        logger.info(
            "Worker received %s id=%s: %s",
            signal.Signals(signum).name,
            self.id,
            "releasing running jobs now" if self._stopping else "finishing running jobs",
        )
        self.stop()

    def _check_migrated(self) -> None:
        pending = db.pending_migrations(self.using)
        if pending:
            raise MissingMigrations(
                f"The database {self.using!r} lacks django_dbjobs migrations ({', '.join(pending)}). "
                "Run `python manage.py migrate`."
            )

    def _register(self) -> None:
        WorkerProcess.objects.using(self.using).create(
            id=self.id,
            hostname=socket.gethostname()[:255],
            pid=os.getpid(),
            queues=self.queues,
            concurrency=self.concurrency,
        )

    def _database_error(self) -> None:
        """The claim loop or the heartbeat met an outage: hold the sweep back, check connections."""
        self.note_database_error()
        self._sweeper.database_error()

    def note_database_error(self) -> None:
        """A job thread met an outage: every job thread checks its connection before its next job."""
        self.database_errors += 1

    def outcome_not_stored(self) -> None:
        """A job thread could not store an outcome: give back what this worker no longer holds."""
        self._claim_in_doubt = True
        self._wake.set()

    # The claim loop

    def _loop(self) -> None:
        while not self._stopping:
            try:
                self.lease.drop_lost_jobs()
            except Exception:  # noqa: BLE001 - not an outage, yet the loop must go on
                logger.exception("Unexpected error while checking jobs id=%s", self.id)
            self._sweeper.sweep_if_due()
            self._acks.flush()
            claimed = self._claim_free_slots()
            if claimed is None:
                continue  # database error: already paused
            if claimed:
                continue
            idle = not self._held
            if idle and self.burst and self._sweeper.first_sweep_pending(self._orphans_may_exist):
                # A burst worker exits once idle; jobs of a worker that died must not
                # wait for the next one: wait for its first sweep (see sweep.py).
                self._waiter.wait(min(self.poll_interval, self._sweeper.due_in()), probe=False)
                continue
            if idle and (self.burst or self._quota_reached()):
                self._acks.flush(force=True)
                logger.info("Worker has no more work id=%s claimed=%s", self.id, self.claimed)
                return
            # With every thread busy a finishing job wakes the loop: no need to look
            # for other processes' new jobs (no probe on MySQL/MariaDB).
            self._waiter.wait(self._wait_time(), probe=self._free_slots() > 0)

    def _wait_time(self) -> float:
        due = self._acks.due_in()
        return self.poll_interval if due is None else min(self.poll_interval, due)

    def _quota_reached(self) -> bool:
        return self.max_jobs is not None and self.claimed >= self.max_jobs

    def _free_slots(self) -> int:
        if self._threads.queued() >= self.concurrency:
            return 0
        free = self.concurrency + self.prefetch.size() - len(self._held)
        if self.max_jobs is not None:
            free = min(free, self.max_jobs - self.claimed)
        return max(free, 0)

    def _claim_free_slots(self) -> int | None:
        """Claim due jobs for free threads plus the prefetch; return how many, None on error.

        Claims only when threads are about to run out of work, so each claim fills
        many slots in one round trip.
        """
        free = self._free_slots()
        if free <= 0:
            return 0
        if self._claim_in_doubt:
            try:
                released = self._outage.call(self._release_unheld, "releasing jobs not held", once=True)
            except Exception:  # noqa: BLE001 - not an outage, yet the loop must go on
                logger.exception("Unexpected error while releasing jobs id=%s", self.id)
                self._wake.wait(self.poll_interval)
                return None
            if released is None:
                return None
            self._claim_in_doubt = False
        try:
            jobs = self._outage.call(lambda: self._claim(free), "claiming jobs", once=True)
        except MissingMigrations:
            raise
        except Exception:  # noqa: BLE001 - not an outage, yet the loop must go on
            logger.exception("Unexpected error while claiming jobs id=%s", self.id)
            jobs = None
            self._wake.wait(self.poll_interval)
        if jobs is None:
            self._claim_in_doubt = True
            return None
        extra = self._held.add(jobs)
        if extra:  # hold one job that must run alone at a time; give the others back now
            self._release(extra, quiet=True)
            jobs = [job for job in jobs if job not in extra]
        self._threads.submit(jobs)
        self.claimed += len(jobs)
        return len(jobs)

    def _claim(self, limit: int) -> list[Job]:
        waiting = self._held.alone is None  # one job that must run alone at a time
        return Job.objects.using(self.using).claim(self.id, limit, self.queues, include_waiting=waiting)

    def job_done(self, job: Job) -> None:
        """A job thread is done with `job` (called on that thread)."""
        self._held.remove([job])
        self.prefetch.job_finished()
        self._wake.set()

    def _release_unheld(self) -> int:
        """Give back jobs this worker owns in the database but does not hold.

        A claim can commit while its answer is lost (the connection broke after the
        COMMIT): those rows are RUNNING under a live, heartbeating worker, so no sweep
        would ever recover them. Only this thread claims, and a job moves from
        the held jobs to the pending successes, so reading them in that order misses none.
        """
        held = self._held.ids() | self._acks.pending_ids()
        released = Job.objects.using(self.using).release_unheld(self.id, held)
        if released:
            logger.warning("Jobs of a failed claim released count=%s id=%s", released, self.id)
        return released

    # Shutdown

    def _orphans_may_exist(self) -> bool:
        try:
            return Job.objects.using(self.using).running().exclude(worker=self.id).exists()
        except (DatabaseError, InterfaceError):
            return True

    def _release(self, jobs: list[Job], quiet: bool = False) -> None:
        """Give unfinished jobs back in one fenced UPDATE: READY, attempts refunded."""
        if not jobs:
            return
        try:
            released = self._outage.call(
                lambda: Job.objects.using(self.using).release_all(self.id, jobs), "releasing jobs"
            )
        except Exception as exc:  # noqa: BLE001 - not an outage: retried by _release_unheld
            released = None
            logger.error("Could not release jobs id=%s: %s", self.id, exc)
        if released is None:
            self._claim_in_doubt = True  # still ours in the database: give them back later
        self._held.remove(jobs)
        (logger.debug if quiet else logger.warning)(
            "Jobs released unfinished count=%s released=%s ids=%s",
            len(jobs),
            released,
            ",".join(job.pk for job in jobs),
        )

    def _shutdown(self) -> None:
        # Prefetched jobs that no thread has started go back at once, for other workers.
        self._release(self._threads.take_unstarted())
        deadline = time.monotonic() + self.shutdown_grace
        while not self.forced and time.monotonic() < deadline:
            if not self._held:
                break
            self._acks.flush(force=True)  # successes are stored as they finish, not when the grace ends
            self._wake.wait(min(0.1, max(deadline - time.monotonic(), 0)))
            self._wake.clear()
        self._acks.flush(force=True)
        self._release(self._held.all())
        # A job that finished while the release ran: its success is stored now, or
        # dropped by the fence if the release got there first (then it runs again).
        self._acks.flush(force=True)
        self._threads.stop()
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat.join(5)
        try:
            WorkerProcess.objects.using(self.using).filter(pk=self.id).delete()
        except (DatabaseError, InterfaceError) as exc:
            logger.warning("Could not remove the worker row id=%s: %s", self.id, exc)
        connections.close_all()
        logger.info("Worker stopped id=%s claimed=%s", self.id, self.claimed)
