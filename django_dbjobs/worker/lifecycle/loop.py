"""Worker: the run_jobs loop. Claims due jobs for its threads, keeps house, and stops when told."""

from __future__ import annotations

import logging
import signal
import time

from ... import db
from ...conf import settings
from ...enqueuing import wakeup
from ...models import Job
from ...models.long_work import stopping_workers
from ...operations.retention import Pruner
from ...schedules.scheduler import Scheduler
from ..claiming.prefetch import Prefetch
from ..identity import Identity, new_worker_id
from ..leases.sweep import Sweeper, orphans_may_exist
from ..running import deadlines, stuck
from . import idle_wait, shutdown, startup, stop_signals, supervisor
from .parts import assemble
from .stop_signals import StopSignals
from .wait_time import wait_time

logger = logging.getLogger("django_dbjobs")

#: Seconds a worker whose wake-up claim came back short waits, at most, before it claims again.
DRAINED_RECHECK = 0.05


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
        self.queues = list(queues or [])
        self.concurrency = concurrency
        self.burst = burst
        self.max_jobs = max_jobs
        self.poll_interval = settings.POLL_INTERVAL if poll_interval is None else poll_interval
        self.shutdown_grace = settings.SHUTDOWN_GRACE if shutdown_grace is None else shutdown_grace
        self.using = using
        self.id = new_worker_id()
        self.identity = Identity(self.id, using, tuple(self.queues))
        self._drained = False  # see _loop()
        self._stopping = False
        self._sweeper = Sweeper(self.id, using)
        self._pruner = Pruner(using)
        #: 0, or the status run_jobs exits with (a stuck job: stuck.py).
        self.exit_status = 0
        #: A stop signal came (SIGTERM, SIGINT): after a stuck job, exit rather than start afresh.
        self.stop_signalled = False
        self._parent = stop_signals.supervisor_pid()  # a child of run_jobs --processes stops with it
        self._scheduler = Scheduler(self.id, using) if scheduler else None
        self.parts = parts = assemble(
            self.identity,
            concurrency=concurrency,
            max_jobs=max_jobs,
            prefetch=Prefetch(settings.PREFETCH if prefetch is None else prefetch, concurrency),
            poll_interval=self.poll_interval,
            on_database_error=self._database_error,
            on_done=self.job_done,
            on_not_stored=self.outcome_not_stored,
        )
        # Ends the loop's wait, whoever sets it: new jobs (enqueuing/wakeup.py), a thread that
        # will want a job, a stop, a success batch or a deadline starting, an outcome not
        # stored. The loop looks at everything on each turn, so it need not know which.
        self._wake, self._forced, self._held = parts.wake, parts.forced, parts.held
        self.prefetch, self.lease, self.claimer = parts.prefetch, parts.lease, parts.claimer
        self._outage, self._acks, self._threads = parts.outage, parts.acks, parts.threads
        self.admitter = parts.admitter

    def run(self) -> None:
        """Work until stopped (signal, --burst drained, or --max-jobs reached)."""
        db.ensure_supported(self.using)
        stopping_workers.discard(self.id)  # current_job().stopping: not until stop()
        signals = StopSignals(self._on_signal)
        signals.install()  # before any thread starts, a job module's included: see stop_signals.py
        try:
            startup.check(self.identity, self._outage)
        except BaseException:
            signals.uninstall()
            raise
        wakeup.subscribe(self._wake)
        deadlines.subscribe(self._wake)
        paused = self.claimer.paused
        self._waiter = idle_wait.IdleWaiter(self.using, self._wake, self.queues, lambda: paused.served)
        self.claimer.claims_on = self._waiter.claims_on  # PostgreSQL: see db/listen.py
        self.claimer.claim_failed_on = self._waiter.claim_failed
        paused.listen_session, self._waiter.on_queues = self._waiter.listen_session, paused.changed
        try:
            startup.start(
                self.parts,
                concurrency=self.concurrency,
                waiter=self._waiter,
                scheduler=self._scheduler,
                on_database_error=self._database_error,
            )
            self._loop()
        finally:
            try:
                self._waiter.stop()  # claims no more: its LISTEN connection is not read from now on
                self._shutdown()
            finally:
                wakeup.unsubscribe(self._wake)
                deadlines.unsubscribe(self._wake)
                signals.uninstall()
                self._wake.close()
                stopping_workers.discard(self.id)

    def _job_stuck(self, armed) -> None:
        """A job ran past its timeout and would not stop: record it, then end this process (stuck.py)."""
        stuck.give_up(armed, self.id, self._outage, self._held, self.shutdown_grace, self.parts.stuck)
        self.exit_status = stuck.EXIT_STATUS
        self.stop()  # the other jobs finish within the grace; the process then exits

    def stop(self) -> None:
        """Ask the worker to stop claiming and finish; a second call stops at once."""
        if self._stopping:
            self._forced.set()
        self._stopping = True
        stopping_workers.add(self.id)  # its long jobs store their place and hand themselves back
        self._wake.set()

    def _on_signal(self, signum: int) -> None:
        logger.info(
            "Worker received %s id=%s: %s",
            signal.Signals(signum).name,
            self.id,
            "releasing running jobs now" if self._stopping else "finishing running jobs",
        )
        self.stop_signalled = True
        self.stop()

    def _database_error(self) -> None:
        """The claim loop or the heartbeat met an outage: hold the sweep back, check connections."""
        self.parts.errors.note()  # every job thread checks its connection before its next job
        self._sweeper.database_error()

    def outcome_not_stored(self) -> None:
        """A job thread could not store an outcome: give back what this worker no longer holds."""
        self.claimer.in_doubt = True
        self._wake.set()

    def _loop(self) -> None:
        while not self._stopping:
            try:
                self.lease.drop_lost_jobs(self._threads, self._outage, self.job_done)
            except Exception:  # noqa: BLE001 - not an outage, yet the loop must go on
                logger.exception("Unexpected error while checking jobs id=%s", self.id)
            self._sweeper.sweep_if_due()
            if self._scheduler is not None:
                self._scheduler.fire_if_due()
            self._pruner.prune_if_due()
            deadlines.enforce(self._job_stuck)
            self.parts.cancels.check_if_due()
            self.parts.progress.write_if_due()
            if supervisor.gone(self._parent) and not self._stopping:
                logger.warning("Worker's supervisor is gone id=%s: stopping", self.id)
                self.stop()
            if self._stopping:
                continue
            self._acks.flush()
            self.parts.reconciler.reconcile_if_due()  # jobs it owns and does not hold (reconcile.py)
            self._admit()
            self.claimer.rated.sync_if_due(self._outage.call)
            if self._drained:
                # The wake-up's claim found fewer due jobs than it asked for, a moment ago:
                # another now would find none, and would only hold the interpreter while the
                # jobs it took start. Claim again once woken, or shortly (what this turn's
                # sweep or scheduler made due may have sent no signal); never exit idle here.
                self._drained = False
                if self._waiter.wait(DRAINED_RECHECK, probe=False):
                    self._claim_woken()  # before this turn's housekeeping, as below
                continue
            held_while_claiming = bool(self._held)
            claimed = self.claimer.claim_free_slots()
            if claimed is None:
                continue  # database error: already paused
            if claimed:
                continue
            idle = not self._held
            if idle and held_while_claiming:
                # The last job ended during the claim, which could not take what that frees (a
                # job that must run alone, while one was held): claim again before judging idle.
                continue
            if (
                idle
                and self.burst
                and self._sweeper.first_sweep_pending(lambda: orphans_may_exist(self.id, self.using))
            ):
                # A burst worker exits once idle; jobs of a worker that died must not
                # wait for the next one: wait for its first sweep (see sweep.py).
                self._wait(min(self.poll_interval, self._sweeper.due_in()), probe=False)
                continue
            if idle and (self.burst or (self.max_jobs is not None and self.claimer.claimed >= self.max_jobs)):
                if self.burst and self._admitted_before_exit():
                    # Keyed jobs given back since the last look (one that must run alone
                    # held, a release) wait for their key's slot again: due all the same.
                    continue
                self._acks.flush(force=True)
                logger.info("Worker has no more work id=%s claimed=%s", self.id, self.claimer.claimed)
                return
            # With every thread busy, a thread wakes the loop when fewer jobs wait than
            # there are threads: no need to look for other processes' new jobs meanwhile
            # (no probe on MySQL/MariaDB).
            if idle:
                # Nothing held, nothing to claim: a success waiting for its batch is stored now,
                # not DBJOBS_ACK_DELAY later, when it would fall on the next wake-up of a
                # steady trickle. A batch gathers while other jobs run or wait.
                self._acks.flush(force=True)
            deadlines.looks_at(self._wake, float("inf"))  # a deadline armed from now on wakes it
            woken = self._wait(
                wait_time(self.poll_interval, self.parts, self._scheduler),
                probe=self.claimer.free_slots() > 0,
            )
            if woken:
                self._claim_woken()

    def _admit(self) -> int:
        """Admit keyed jobs to their keys' slots (worker/claiming/admitter.py); how many."""
        admitted = self.admitter.admit_if_due()
        if admitted:  # in a rate-limited queue, they wait for its rate: look there again at once
            self.claimer.rated.claims.woken()
        return admitted

    def _admitted_before_exit(self) -> bool:
        """Whether a last look at every key admitted jobs (a burst worker about to exit)."""
        self.admitter.look_now()
        return self._admit() > 0

    def _claim_woken(self) -> None:
        """Woken: new jobs or a free thread. Claim now, the loop's housekeeping after (a success
        batch to store, a sweep...): an idle worker's wake-up waits for nothing but its claim.
        New jobs may be waiting for a concurrency slot: the next turn admits them."""
        if self._stopping or supervisor.gone(self._parent):
            return
        self.admitter.look_now()
        self.claimer.rated.claims.woken()
        claimed = self.claimer.claim_free_slots(woken=True)
        # Short, but some: wait a moment before claiming again (see _loop()). None at all,
        # woken by a free thread or another process's job someone else took: the next
        # turn's idle wait probes (MySQL/MariaDB, SQLite), where the drained one would not.
        # None after a probe saw work: the probe may see jobs the claim leaves (one that
        # must run alone while one runs), so pause, or probe and claim every 10 ms.
        self._drained = self.claimer.came_short and (bool(claimed) or self._waiter.probed)

    def _wait(self, seconds: float, probe: bool) -> bool:
        """Wait for a wake-up, `seconds` at most; a job deadline due sooner ends it (deadlines.py)."""
        deadlines.looks_at(self._wake, time.monotonic() + seconds)
        woken = self._waiter.wait(seconds, probe=probe)
        deadlines.looks_at(self._wake, 0.0)  # its turn ends by looking at the deadlines
        return woken

    def job_done(self, job: Job, seconds: float | None = None) -> None:
        """A job thread is done with `job`, which ran `seconds` (None: it did not run); called
        on that thread.

        The loop is woken only when it may claim (fewer jobs wait than there are threads:
        claim_free_slots() claims nothing while enough wait) or is stopping; a thread taking
        the last waiting jobs wakes it too (job_threads.py), so it claims while they run,
        and so do the start of a success batch and a deadline it must not sleep past
        (success_batch.py, deadlines.py). Woken after every job, it ran its whole turn once a job,
        and with many worker processes sharing few cores, each turn on cold caches cost
        them as much as the jobs.
        """
        self._held.remove([job])
        if seconds is not None:
            self.prefetch.job_finished(seconds)
        if job.concurrency_key is not None:  # its outcome is stored (never batched): a slot is free
            self.admitter.freed(job.concurrency_key)
            self._wake.set()
        elif self._threads.queued() < self.concurrency or self._stopping:
            self._wake.set()

    def _shutdown(self) -> None:
        shutdown.shut_down(self.parts, self.shutdown_grace)
