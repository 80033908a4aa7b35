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

from .. import db, registry
from ..conf import settings
from ..db.outage import Outage
from ..enqueuing import wakeup
from ..models import Job, WorkerProcess
from ..operations import known_queues
from ..operations.retention import Pruner
from ..schedules.scheduler import Scheduler
from . import async_jobs, idle_wait, stuck, supervisor, timeouts
from .acks import SuccessBatch
from .claiming import Claimer
from .heartbeat import Heartbeat
from .held import HeldJobs
from .job_threads import JobThreads
from .lease import Lease
from .prefetch import Prefetch
from .stop_signals import StopSignals
from .sweep import Sweeper, stale_before
from .wake_event import WakeEvent

logger = logging.getLogger("django_dbjobs")

#: Seconds a worker whose wake-up claim came back short waits, at most, before it claims again.
DRAINED_RECHECK = 0.05


def new_worker_id() -> str:
    """An identity unique to this process start, even where hostname and pid repeat."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{secrets.token_hex(4)}"


class Worker:
    """Claim due jobs and run them on `concurrency` threads until told to stop.

    The main thread claims, stores batched successes, sweeps and shuts down; job
    threads (job_threads.py) run jobs. A claimed job is held (held.py) from its claim
    until its thread is done with it (outcome stored, or handed to the success
    batch, which the main thread stores, so Claimer.release_unheld() reads the two in that
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
        scheduler: bool = True,
    ):
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1.")
        if max_jobs is not None and max_jobs < 1:
            raise ValueError("max_jobs must be at least 1.")
        self.prefetch = Prefetch(settings.PREFETCH if prefetch is None else prefetch, concurrency)
        self.queues = list(queues or [])
        self.concurrency = concurrency
        self.burst = burst
        self.max_jobs = max_jobs
        self.poll_interval = settings.POLL_INTERVAL if poll_interval is None else poll_interval
        self.shutdown_grace = settings.SHUTDOWN_GRACE if shutdown_grace is None else shutdown_grace
        self.using = using
        self.id = new_worker_id()
        self._held = HeldJobs()
        # Ends the loop's wait, whoever sets it: new jobs (wakeup.py), a thread that will want
        # a job, a stop, a success batch or a deadline starting, an outcome not stored. The
        # loop looks at everything on each turn, so it need not know which.
        self._wake = WakeEvent()  # the idle wait on PostgreSQL polls it (wakeup.py)
        self._drained = False  # see _loop()
        self._stopping = False
        self._forced = threading.Event()
        self.lease = Lease(self)
        self._heartbeat: Heartbeat | None = None
        self._sweeper = Sweeper(self.id, using)
        self._pruner = Pruner(using)
        #: 0, or the status run_jobs exits with (a stuck job: stuck.py).
        self.exit_status = 0
        self._parent = supervisor.supervisor_pid()  # a child of run_jobs --processes stops with it
        self._scheduler = Scheduler(self.id, using) if scheduler else None
        self._outage = Outage(
            using,
            on_error=self._database_error,
            forced=self._forced,
            wake=self._wake,
            looks_at=timeouts.looks_at,
        )
        self._acks = SuccessBatch(
            self.id, using, self._wake, self._outage, on_not_stored=self.outcome_not_stored
        )
        self._threads = JobThreads(self, concurrency)
        self.claimer = Claimer(self)
        #: Database errors seen so far; job threads check their connections when it moves.
        self.database_errors = 0

    # Lifecycle

    def run(self) -> None:
        """Work until stopped (signal, --burst drained, or --max-jobs reached)."""
        db.ensure_supported(self.using)
        signals = StopSignals(self._on_signal)
        signals.install()  # before any thread starts, a job module's included: see stop_signals.py
        try:
            registry.autodiscover()
            # Before anything is written: an unmigrated database gets the one line saying so.
            self._outage.call(lambda: db.require_migrated(self.using), "checking the database")
        except BaseException:
            signals.uninstall()
            raise
        if not supervisor.supervised():  # run_jobs --processes says it once, not once per child
            known_queues.warn_unused(self.queues, self.using)
        wakeup.subscribe(self._wake)
        timeouts.subscribe(self._wake)
        paused = self.claimer.paused
        self._waiter = idle_wait.IdleWaiter(self.using, self._wake, self.queues, lambda: paused.served)
        try:
            if self._scheduler is not None:
                self._outage.call(self._scheduler.sync_settings, "syncing DBJOBS_SCHEDULES")
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
                "Worker started id=%s queues=%s threads=%s registered_jobs=%s prefetch_max=%s scheduler=%s",
                self.id,
                ",".join(self.queues) or "*",
                self.concurrency,
                len(registry.registered()),
                self.prefetch.most,
                "on" if self._scheduler is not None else "off",
            )
            self._loop()
        finally:
            try:
                self._waiter.stop()  # claims no more: its LISTEN connection is not read from now on
                self._shutdown()
            finally:
                wakeup.unsubscribe(self._wake)
                timeouts.unsubscribe(self._wake)
                signals.uninstall()
                self._wake.close()

    def _job_stuck(self, armed) -> None:
        """A job ran past its timeout and would not stop: record it, then end this process (stuck.py)."""
        try:
            # Its retry waits until this process is gone, so the stuck call cannot overlap it.
            # (the grace, then the process's own exit: heartbeat, listener, threads, its row)
            margin = self.shutdown_grace + timeouts.STUCK_AFTER + 30
            stuck.record(armed, self.id, self._outage, min_delay=margin)
        except Exception:  # noqa: BLE001 - the worker stops all the same
            logger.exception("Could not record the timeout of job id=%s", armed.job.pk)
        self._held.remove([armed.job])  # its thread may never give it back
        self.exit_status = stuck.EXIT_STATUS
        self.stop()  # the other jobs finish within the grace; the process then exits

    def stop(self) -> None:
        """Ask the worker to stop claiming and finish; a second call stops at once."""
        if self._stopping:
            self._forced.set()
        self._stopping = True
        self._wake.set()

    @property
    def claimed(self) -> int:
        """Jobs claimed (and kept) since the worker started."""
        return self.claimer.claimed

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
        self.claimer.in_doubt = True
        self._wake.set()

    # The claim loop

    def _loop(self) -> None:
        while not self._stopping:
            try:
                self.lease.drop_lost_jobs()
            except Exception:  # noqa: BLE001 - not an outage, yet the loop must go on
                logger.exception("Unexpected error while checking jobs id=%s", self.id)
            self._sweeper.sweep_if_due()
            if self._scheduler is not None:
                self._scheduler.fire_if_due()
            self._pruner.prune_if_due()
            timeouts.enforce(self._job_stuck)
            if self._supervisor_gone() and not self._stopping:
                logger.warning("Worker's supervisor is gone id=%s: stopping", self.id)
                self.stop()
            if self._stopping:
                continue
            self._acks.flush()
            if self._drained:
                # The wake-up's claim found fewer due jobs than it asked for, a moment ago:
                # another now would find none, and would only hold the interpreter while the
                # jobs it took start. Claim again once woken, or shortly (what this turn's
                # sweep or scheduler made due may have sent no signal); never exit idle here.
                self._drained = False
                self._waiter.wait(DRAINED_RECHECK, probe=False)
                continue
            claimed = self.claimer.claim_free_slots()
            if claimed is None:
                continue  # database error: already paused
            if claimed:
                continue
            idle = not self._held
            if idle and self.burst and self._sweeper.first_sweep_pending(self._orphans_may_exist):
                # A burst worker exits once idle; jobs of a worker that died must not
                # wait for the next one: wait for its first sweep (see sweep.py).
                wait = min(self.poll_interval, self._sweeper.due_in())
                timeouts.looks_at(self._wake, time.monotonic() + wait)
                self._waiter.wait(wait, probe=False)
                timeouts.looks_at(self._wake, 0.0)
                continue
            if idle and (self.burst or self._quota_reached()):
                self._acks.flush(force=True)
                logger.info("Worker has no more work id=%s claimed=%s", self.id, self.claimer.claimed)
                return
            # With every thread busy, a thread wakes the loop when fewer jobs wait than
            # there are threads: no need to look for other processes' new jobs meanwhile
            # (no probe on MySQL/MariaDB).
            timeouts.looks_at(self._wake, float("inf"))  # a deadline armed from now on wakes it
            wait = self._wait_time()
            timeouts.looks_at(self._wake, time.monotonic() + wait)
            woken = self._waiter.wait(wait, probe=self.claimer.free_slots() > 0)
            timeouts.looks_at(self._wake, 0.0)  # its turn ends by looking at the deadlines
            if woken and not self._stopping and not self._supervisor_gone():
                # Woken: new jobs or a free thread. Claim now, the housekeeping above after:
                # an idle worker's wake-up waits for nothing but its claim.
                self.claimer.claim_free_slots()
                self._drained = self.claimer.came_short

    def _supervisor_gone(self) -> bool:
        """Whether this worker was started by --processes and that process has gone."""
        return self._parent is not None and os.getppid() != self._parent

    def _wait_time(self) -> float:
        due = self._acks.due_in()
        wait = self.poll_interval if due is None else min(self.poll_interval, due)
        deadline = timeouts.due_in()
        if deadline is not None:
            wait = min(wait, deadline + 0.01)
        return wait if self._scheduler is None else min(wait, self._scheduler.due_in())

    def _quota_reached(self) -> bool:
        return self.max_jobs is not None and self.claimer.claimed >= self.max_jobs

    def job_done(self, job: Job, seconds: float | None = None) -> None:
        """A job thread is done with `job`, which ran `seconds` (None: it did not run); called
        on that thread.

        The loop is woken only when it may claim (fewer jobs wait than there are threads:
        claim_free_slots() claims nothing while enough wait) or is stopping; a thread taking
        the last waiting jobs wakes it too (job_threads.py), so it claims while they run,
        and so do the start of a success batch and a deadline it must not sleep past
        (acks.py, timeouts.py). Woken after every job, it ran its whole turn once a job,
        and with many worker processes sharing few cores, each turn on cold caches cost
        them as much as the jobs.
        """
        self._held.remove([job])
        if seconds is not None:
            self.prefetch.job_finished(seconds)
        if self._threads.queued() < self.concurrency or self._stopping:
            self._wake.set()

    # Shutdown

    def _orphans_may_exist(self) -> bool:
        """True if jobs are RUNNING under a worker whose heartbeat is stale or whose row is gone."""
        live = WorkerProcess.objects.using(self.using).filter(
            heartbeat_at__gte=stale_before(settings.HEARTBEAT_TIMEOUT)
        )
        try:
            running = Job.objects.using(self.using).running().exclude(worker=self.id)
            return running.exclude(worker__in=live.values("pk")).exists()
        except (DatabaseError, InterfaceError):
            return True

    def _shutdown(self) -> None:
        # Prefetched jobs that no thread has started go back at once, for other workers.
        self.claimer.release(self._threads.take_unstarted(close=True))
        deadline = time.monotonic() + self.shutdown_grace
        while not self.forced and time.monotonic() < deadline:
            if not self._held:
                break
            self._acks.flush(force=True)  # successes are stored as they finish, not when the grace ends
            self._wake.wait(min(0.1, max(deadline - time.monotonic(), 0)))
            self._wake.clear()
        self._acks.flush(force=True)
        self.claimer.release(self._held.all())
        cancelled = async_jobs.cancel_all()  # released: they must not run on (async_jobs.py)
        if cancelled:
            logger.warning("Cancelled async jobs still running at the end of the grace count=%s", cancelled)
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
        logger.info("Worker stopped id=%s claimed=%s", self.id, self.claimer.claimed)
