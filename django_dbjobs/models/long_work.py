"""LongWork: what a long job's own code calls on itself: progress, checkpoints, whether to stop.

``current_job().progress(done, total)`` costs no query: the report waits in memory for
the worker (worker/running/progress_writer.py). ``current_job().checkpoint(state)`` is
written at once, on the job's own connection: inside the job's transaction it commits
(or rolls back) with the work it describes. ``current_job().resume`` is the last
checkpoint stored, whichever attempt stored it.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connections

from .. import db
from ..conf import settings
from ..exceptions import PayloadTooLarge
from . import cancelling
from .json_values import json_value
from .progress import Progress, report
from .states import JobStatus

logger = logging.getLogger("django_dbjobs")

#: The ids of this process's workers asked to stop (SIGTERM, SIGINT, a stuck job, their
#: supervisor gone): what ``current_job().stopping`` reads, so that a long job stores its
#: place and hands itself back (ResumeLater). Worker.stop() adds its id, and its run()
#: takes it out as it starts and once it has stopped. By worker, not one flag for the
#: process: a worker stopping in a test never tells the jobs of another worker running
#: beside it, nor those of testing.run_jobs(). (Adding and discarding a string are atomic.)
stopping_workers: set[str] = set()


class ProgressHandle:
    """``job.progress``: call it to report, read it for the newest report (None before any).

    ``job.progress(40, total=100, note="users")`` from the job's own code; ``job.progress.done``,
    ``.total``, ``.note``, ``.rate`` (per second), ``.eta`` (seconds left), ``.fraction``,
    ``.percent`` and ``.at`` anywhere (None when the job never reported).
    """

    __slots__ = ("_job",)

    def __init__(self, job: LongWork):
        self._job = job

    def __call__(self, done: float, total: float | None = None, note: str = "") -> None:
        """Report that `done` of `total` are done (`note`: what it is on); written within a second."""
        self._job._report_progress(done, total, note)

    @property
    def value(self) -> Progress | None:
        """The newest report: this run's, not written yet, or the one stored with the job."""
        return self._job._progress_report or Progress.from_record(self._job.progress_state)

    def __bool__(self) -> bool:
        return self.value is not None

    def __repr__(self) -> str:
        return f"<Progress {self.value!r}>"

    def _read(name: str):  # type: ignore[misc]  # noqa: N805 - a property maker, used below only
        return property(lambda self: getattr(self.value, name, None))

    done = _read("done")
    total = _read("total")
    note = _read("note")
    rate = _read("rate")
    eta = _read("eta")
    fraction = _read("fraction")
    percent = _read("percent")
    at = _read("at")
    del _read


class LongWork:
    """The long-job half of Job (models/job.py): progress, checkpoint(), resume, stopping."""

    progress_state: Any
    checkpoint_state: Any
    #: This run's newest report (a job thread writes it), and the one last stored (the worker's).
    _progress_report: Progress | None = None
    _progress_written: Progress | None = None
    _checkpoint_depth: int | None = None
    #: True while the job's own code runs (context.running()).
    _running = False

    @property
    def progress(self) -> ProgressHandle:
        return ProgressHandle(self)

    @property
    def resume(self) -> Any:
        """The last checkpoint stored for this job (None: none), to carry on from."""
        return self.checkpoint_state

    @property
    def stopping(self) -> bool:
        """Whether the worker running this job was asked to stop (a deploy's SIGTERM).

        A long job that sees it may store its place with checkpoint() and raise ResumeLater:
        it goes back to READY, its attempt not charged, and another worker carries on.
        """
        return self.worker is not None and self.worker in stopping_workers

    def _report_progress(self, done: Any, total: Any, note: Any) -> None:
        self._running_here("progress()")
        self._progress_report = report(self._progress_report, done, total, note)

    def pending_progress(self) -> Progress | None:
        """This run's newest report if it is not stored yet (the worker's writer asks)."""
        newest = self._progress_report
        return newest if newest is not None and newest is not self._progress_written else None

    def mark_progress_stored(self, report: Progress) -> None:
        """Note that `report` is stored with the job (by whichever write stored it)."""
        self._progress_written = report
        self.progress_state = report.as_record()

    def final_progress(self) -> dict[str, Any]:
        """The outcome write's change storing this run's newest report, if not stored yet ({}: none).

        The outcome's UPDATE carries it (models/job_outcomes.py): a job's last report is
        kept after it ends, at no extra query.
        """
        pending = self.pending_progress()
        return {} if pending is None else {"progress_state": pending.as_record()}

    def checkpoint(self, state: Any) -> bool:
        """Store `state` (JSON data) with this job now; a later run of it reads it as ``resume``.

        Written on this thread's connection: inside a transaction it commits with it. Return
        False, storing nothing, if this worker no longer owns the job (a sweep took it back:
        the job runs again elsewhere, from the last checkpoint stored). Raises
        InvalidJobArguments for a state that is not JSON data, PayloadTooLarge for one larger
        than DBJOBS_MAX_CHECKPOINT_BYTES.
        """
        self._running_here("checkpoint()")
        clean = json_value(state, "the checkpoint", db.rejects_nul(self._state.db))
        size = len(json.dumps(clean, separators=(",", ":")).encode())
        if size > settings.MAX_CHECKPOINT_BYTES:
            raise PayloadTooLarge(
                f"The checkpoint takes {size} bytes as JSON, more than DBJOBS_MAX_CHECKPOINT_BYTES "
                f"({settings.MAX_CHECKPOINT_BYTES}). Store a cursor (an id, an offset), not the data."
            )
        changes: dict[str, Any] = {"checkpoint_state": clean}
        pending = self.pending_progress()
        if pending is not None:  # a write anyway: the newest progress rides along
            changes["progress_state"] = pending.as_record()
        if not self._owned(self.worker).update(**changes):
            logger.warning(
                "Checkpoint not stored: this worker no longer owns the job id=%s name=%s", self.pk, self.name
            )
            return False
        self.checkpoint_state = clean
        # How many transactions it was written in: testing.run_jobs() keeps one written in its
        # savepoint alone (a worker's, in autocommit, outlives a failure: execution.py).
        self._checkpoint_depth = len(connections[self._state.db or "default"].atomic_blocks)
        if pending is not None:
            self.mark_progress_stored(pending)
        return True

    async def acheckpoint(self, state: Any) -> bool:
        """checkpoint() from an ``async def`` job."""
        return await sync_to_async(self.checkpoint)(state)

    def hand_back(self, worker: str, delay: float) -> str | None:
        """Give this job back unfinished (it raised ResumeLater): READY in `delay` seconds, its
        pickup undone, its checkpoint kept.

        Like a release at shutdown, fenced on owner and pickup; one asked to stop is recorded
        cancelled instead. Return the status written (READY; FAILED: cancelled), or None if
        `worker` no longer owns it.
        """
        pending = self.pending_progress()  # the last report goes back with it, in the same UPDATE
        given_back, cancelled = self._owned(worker)._refund(
            why=cancelling.HANDED_BACK, due_in=delay, also=self.final_progress(), expected=1
        )
        if self.pk in cancelled:
            cancelling.mark(self, cancelled[self.pk], refund=True)
            return JobStatus.FAILED
        if not given_back:
            return None
        self.status, self.worker, self.attempts = JobStatus.READY, None, self.attempts - 1
        self.worker_ids = self.worker_ids[:-1]
        if pending is not None:
            self.mark_progress_stored(pending)
        return JobStatus.READY

    def _running_here(self, what: str) -> None:
        if not self._running:
            raise RuntimeError(
                f"{what} is for the job's own code while it runs: call it on current_job(), "
                f"inside the job (job {self.pk} is not running here)."
            )
