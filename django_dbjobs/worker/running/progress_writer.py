"""ProgressWriter: a worker writes its running jobs' new progress reports, at most once a second.

``current_job().progress()`` only keeps the report in memory (models/long_work.py). On
the loop's tick (once a second while it holds jobs, the cancel watch's tick), the jobs
with a report newer than the one stored are written in one UPDATE, fenced on owner and
pickup (models/progress_store.py); no held job with a new report, no query. A job's
final report is stored with its outcome (models/job_outcomes.py, db/completions.py).

Why not on the heartbeat, as the issue suggested: the heartbeat beats every
DBJOBS_HEARTBEAT_INTERVAL (5 s), too slow to watch, and on its own thread so that
nothing delays it; a progress write meeting a busy row or database must never cost the
worker its lease. The loop already wakes once a second while jobs run, for the cancel
watch: the writes ride on that tick, on the main thread's connection. They never wait
for a lock (a job's own transaction holding its row): that row is skipped, and written
on the next tick.
"""

from __future__ import annotations

import logging
import time

from ...db.outage import Outage
from ...exceptions import MissingMigrations
from ...models.progress_store import store_reports
from ..claiming.held import HeldJobs
from ..identity import Identity

logger = logging.getLogger("django_dbjobs")

#: Seconds between two writes of a job's progress, at least.
WRITE_INTERVAL = 1.0


class ProgressWriter:
    def __init__(self, identity: Identity, held: HeldJobs, outage: Outage):
        self.identity = identity
        self.held = held
        self.outage = outage
        self._next = 0.0

    def write_if_due(self) -> None:
        """Write the held jobs' new progress reports when a write is due and jobs are held."""
        now = time.monotonic()
        if now < self._next or not len(self.held):
            return
        self._next = now + WRITE_INTERVAL
        self.write_now()

    def write_now(self) -> int:
        """Write the held jobs' new progress reports; return how many were written."""
        reports = [(job, report) for job in self.held.all() if (report := job.pending_progress()) is not None]
        if not reports:
            return 0
        worker = self.identity
        try:
            written = self.outage.call(
                lambda: store_reports(worker.using, worker.id, reports), "writing progress", once=True
            )
        except MissingMigrations:
            raise
        except Exception:  # noqa: BLE001 - not an outage, yet the loop must go on
            logger.exception("Unexpected error while writing progress id=%s", worker.id)
            return 0
        for job, report in reports:
            if written and job.pk in written:
                job.mark_progress_stored(report)
        return len(written or ())

    def due_in(self) -> float:
        return max(self._next - time.monotonic(), 0.0)
