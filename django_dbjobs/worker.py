"""Worker: the run_jobs loop. Claims due jobs, runs them on threads, shuts down gracefully."""

from __future__ import annotations

import collections
import logging
import os
import queue as queue_module
import secrets
import signal
import socket
import threading
import time

from django.db import DatabaseError, InterfaceError, connections

from . import db, execution, registry, wakeup
from .acks import SuccessBatch
from .conf import settings
from .heartbeat import Heartbeat
from .models import Job, WorkerProcess
from .outage import Outage
from .stop_signals import StopSignals
from .sweep import Sweeper

logger = logging.getLogger("django_dbjobs")

#: Seconds of recent completions the adaptive prefetch looks at.
PREFETCH_WINDOW = 0.1


def new_worker_id() -> str:
    """An identity unique to this process start, even where hostname and pid repeat."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{secrets.token_hex(4)}"


class Worker:
    """Claim due jobs and run them on `concurrency` threads until told to stop."""

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
        self.prefetch = settings.PREFETCH if prefetch is None else prefetch
        if self.prefetch < 0:
            raise ValueError("prefetch must be 0 or more.")
        self.queues = list(queues or [])
        self.concurrency = concurrency
        self.burst = burst
        self.max_jobs = max_jobs
        self.poll_interval = settings.POLL_INTERVAL if poll_interval is None else poll_interval
        self.shutdown_grace = settings.SHUTDOWN_GRACE if shutdown_grace is None else shutdown_grace
        self.using = using
        self.id = new_worker_id()
        self.claimed = 0
        # Claimed and not finished: waiting for a thread (prefetched) or running.
        self._running: dict[str, Job] = {}
        # When recent jobs finished, to size the prefetch (see _prefetch_now).
        self._finished_at: collections.deque[float] = collections.deque(maxlen=1000)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        # Successes not yet stored: written in one UPDATE per batch.
        self._acks = SuccessBatch(self.id, using, self._wake)
        self._tasks: queue_module.SimpleQueue[Job | None] = queue_module.SimpleQueue()
        self._stopping = False
        self._forced = False
        self._threads: list[threading.Thread] = []
        self._heartbeat: Heartbeat | None = None
        self._sweeper = Sweeper(self.id, using)
        self._outage = Outage(self._wake, on_error=self._database_error, give_up=lambda: self._forced)
        # A claim failed: it may have committed all the same (see _release_unheld).
        self._claim_in_doubt = False

    # Lifecycle

    def run(self) -> None:
        """Work until stopped (signal, --burst drained, or --max-jobs reached)."""
        db.ensure_supported(self.using)
        registry.autodiscover()
        signals = StopSignals(self._on_signal)
        signals.install()  # before any thread starts: see stop_signals.py
        wakeup.subscribe(self._wake)
        self._waiter = wakeup.IdleWaiter(self.using, self._wake, self.queues)
        self._waiter.start()
        try:
            self._outage.call(self._register, "registering the worker")
            self._heartbeat = Heartbeat(
                self.id,
                settings.HEARTBEAT_INTERVAL,
                self._register,
                self.using,
                on_error=self._database_error,
            )
            self._heartbeat.start()
            self._start_threads()
            logger.info(
                "Worker started id=%s queues=%s concurrency=%s jobs=%s",
                self.id,
                ",".join(self.queues) or "*",
                self.concurrency,
                len(registry.registered()),
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
            self._forced = True
        self._stopping = True
        self._wake.set()

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
        self._sweeper.database_error()

    # The claim loop

    def _loop(self) -> None:
        while not self._stopping:
            self._sweeper.sweep_if_due()
            self._acks.flush()
            claimed = self._claim_free_slots()
            if claimed is None:
                continue  # database error: already paused
            if claimed:
                continue
            with self._lock:
                idle = not self._running
            if idle and (self.burst or self._quota_reached()):
                self._acks.flush(force=True)
                logger.info("Worker has no more work id=%s claimed=%s", self.id, self.claimed)
                return
            self._waiter.wait(self._wait_time())

    def _wait_time(self) -> float:
        due = self._acks.due_in()
        return self.poll_interval if due is None else min(self.poll_interval, due)

    def _quota_reached(self) -> bool:
        return self.max_jobs is not None and self.claimed >= self.max_jobs

    def _claim_free_slots(self) -> int | None:
        """Claim due jobs for free threads plus the prefetch; return how many, None on error.

        Claims only when threads are about to run out of work, so each claim fills
        many slots in one round trip.
        """
        if self._tasks.qsize() >= self.concurrency:
            return 0
        with self._lock:
            free = self.concurrency + self._prefetch_now() - len(self._running)
        if self.max_jobs is not None:
            free = min(free, self.max_jobs - self.claimed)
        if free <= 0:
            return 0
        if self._claim_in_doubt:
            if self._outage.call(self._release_unheld, "releasing jobs of a failed claim", once=True) is None:
                return None
            self._claim_in_doubt = False
        jobs = self._outage.call(lambda: self._claim(free), "claiming jobs", once=True)
        if jobs is None:
            self._claim_in_doubt = True
            return None
        with self._lock:
            for job in jobs:
                self._running[job.pk] = job
        for job in jobs:
            self._tasks.put(job)
        self.claimed += len(jobs)
        return len(jobs)

    def _prefetch_now(self) -> int:
        """Prefetch about as many jobs as finished in the last PREFETCH_WINDOW, up to the setting.

        Fast jobs get large claims (one round trip feeds many); slow jobs get small
        ones, so a worker never hoards jobs that idle workers could be running.
        """
        horizon = time.monotonic() - PREFETCH_WINDOW
        recent = 0
        for finished in reversed(self._finished_at):
            if finished < horizon or recent >= self.prefetch:
                break
            recent += 1
        return recent

    def _claim(self, limit: int) -> list[Job]:
        return Job.objects.using(self.using).claim(self.id, limit, self.queues)

    def _release_unheld(self) -> int:
        """Give back jobs this worker owns in the database but does not hold.

        A claim can commit while its answer is lost (the connection broke after the
        COMMIT): those rows are RUNNING under a live, heartbeating worker, so no sweep
        would ever recover them. Only this thread claims, and a job moves from
        _running to the pending successes, so reading them in that order misses none.
        """
        with self._lock:
            held = set(self._running)
        held |= self._acks.pending_ids()
        released = Job.objects.using(self.using).release_unheld(self.id, held)
        if released:
            logger.warning("Jobs of a failed claim released count=%s id=%s", released, self.id)
        return released

    # Job threads

    def _start_threads(self) -> None:
        for n in range(self.concurrency):
            thread = threading.Thread(target=self._work, name=f"dbjobs-worker-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _work(self) -> None:
        try:
            while (job := self._tasks.get()) is not None:
                try:
                    execution.run(job, self.id, on_success=self._acks.add)
                except BaseException:  # noqa: B036 - a job thread must never die
                    logger.exception("Unexpected error running job id=%s", job.pk)
                finally:
                    with self._lock:
                        self._running.pop(job.pk, None)
                        self._finished_at.append(time.monotonic())
                    self._wake.set()
        finally:
            connections.close_all()

    # Shutdown

    def _release(self, jobs: list[Job]) -> None:
        """Give unfinished jobs back in one fenced UPDATE: READY, attempts refunded."""
        if not jobs:
            return
        released = self._outage.call(
            lambda: Job.objects.using(self.using).release_all(self.id, jobs), "releasing jobs"
        )
        with self._lock:
            for job in jobs:
                self._running.pop(job.pk, None)
        logger.warning(
            "Jobs released unfinished count=%s released=%s ids=%s",
            len(jobs),
            released,
            ",".join(job.pk for job in jobs),
        )

    def _shutdown(self) -> None:
        # Prefetched jobs that no thread has started go back at once, for other workers.
        unstarted = []
        while True:
            try:
                job = self._tasks.get_nowait()
            except queue_module.Empty:
                break
            if job is not None:
                unstarted.append(job)
        self._release(unstarted)
        deadline = time.monotonic() + self.shutdown_grace
        while not self._forced and time.monotonic() < deadline:
            with self._lock:
                if not self._running:
                    break
            self._wake.wait(min(0.1, max(deadline - time.monotonic(), 0)))
            self._wake.clear()
        self._acks.flush(force=True)
        with self._lock:
            unfinished = list(self._running.values())
        self._release(unfinished)
        for _ in self._threads:
            self._tasks.put(None)
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat.join(5)
        try:
            WorkerProcess.objects.using(self.using).filter(pk=self.id).delete()
        except (DatabaseError, InterfaceError) as exc:
            logger.warning("Could not remove the worker row id=%s: %s", self.id, exc)
        connections.close_all()
        logger.info("Worker stopped id=%s claimed=%s", self.id, self.claimed)
