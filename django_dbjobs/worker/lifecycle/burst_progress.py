"""BurstProgress: the live line `run_jobs --burst` draws on a terminal.

    processed 1,204  failed 3  412/s  left 8,796

Counted from job_finished (every stored outcome: successes, retries, dead letters);
"left" is the due jobs of the worker's queues, counted at most once a second and capped,
so a backlog of millions costs an index range of LEFT_CAP rows, not a table count.
"""

from __future__ import annotations

import logging
import threading
import time

from django.db import connections

from ...models import Job, JobStatus
from ...signals import job_finished
from .stop_signals import taken_signals_blocked

LOGGER = logging.getLogger("django_dbjobs")
#: Seconds between redraws; the most due jobs counted for "left".
REFRESH = 1.0
LEFT_CAP = 100_000


class BurstProgress:
    """Redraw one line on `out` (a terminal) while the block runs; leave a summary line at the end."""

    def __init__(self, out, queues: list[str] | None, using: str):
        self.out = out
        self.queues = queues
        self.using = using
        self.processed = 0
        self.failed = 0
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._draw_until_done, name="dbjobs-progress", daemon=True)

    def __enter__(self) -> BurstProgress:
        job_finished.connect(self._count, weak=False)
        # A log line written to the same terminal clears the live line first, so it starts
        # at the left margin; the live line is drawn again below it at the next refresh.
        for handler in LOGGER.handlers:
            handler.addFilter(self._clear_line)
        # Threads inherit the signal mask: this one must not take the worker's SIGTERM
        # (see stop_signals.py), so it starts with the stop signals blocked.
        with taken_signals_blocked():
            self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        job_finished.disconnect(self._count)
        for handler in LOGGER.handlers:
            handler.removeFilter(self._clear_line)
        self._done.set()
        self._thread.join(5)
        self.out.write(f"\r\x1b[K{self.line(left=None)}")
        self.out.flush()

    def _clear_line(self, record) -> bool:
        self.out.write("\r\x1b[K", ending="")
        self.out.flush()
        return True

    def _count(self, sender, job, status, **kwargs) -> None:
        with self._lock:
            self.processed += 1
            if status == JobStatus.FAILED or (status == JobStatus.READY and job.errors):
                self.failed += 1

    def line(self, left: int | None) -> str:
        elapsed = max(time.monotonic() - self._started, 1e-6)
        with self._lock:
            processed, failed = self.processed, self.failed
        text = f"processed {processed:,}  failed {failed:,}  {processed / elapsed:,.0f}/s"
        if left is not None:
            text += f"  left {left:,}" + ("+" if left >= LEFT_CAP else "")
        return text

    def _draw_until_done(self) -> None:
        try:
            while not self._done.wait(REFRESH):
                self.out.write(f"\r\x1b[K{self.line(self._left())}", ending="")
                self.out.flush()
        finally:
            connections.close_all()  # this thread's own connection

    def _left(self) -> int | None:
        try:
            due = Job.objects.using(self.using).claimable().for_queues(self.queues)
            return due.order_by()[:LEFT_CAP].count()
        except Exception:  # noqa: BLE001 - a progress line must never stop the worker
            return None
