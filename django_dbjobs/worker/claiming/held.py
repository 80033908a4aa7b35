"""HeldJobs: what a worker has claimed and not finished."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ...models import Isolation, Job


class HeldJobs:
    """Jobs a worker claimed and has not finished: waiting for a thread (prefetched) or running.

    A job is held from its claim until its thread is done with it (outcome stored, or
    handed to the success batch). At most one held job is one that must run alone
    (`alone`; see models.Isolation). A job given up as stuck (worker/running/stuck.py) is no
    longer held, yet its call runs on: its id stays in `abandoned`, so that jobs given
    back as not held (Claimer.release_unheld(), reconcile.py) never include it. Safe to
    use from any thread.
    """

    def __init__(self):
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self.alone: str | None = None
        self._abandoned: set[str] = set()

    def __len__(self) -> int:
        with self._lock:
            return len(self._jobs)

    def add(self, jobs: list[Job]) -> list[Job]:
        """Hold `jobs`, but at most one that must run alone; return those it will not hold."""
        extra = []
        with self._lock:
            for job in jobs:
                if job.isolation != Isolation.NONE:
                    if self.alone is not None:
                        extra.append(job)
                        continue
                    self.alone = job.pk
                self._jobs[job.pk] = job
        return extra

    def remove(self, jobs: list[Job]) -> None:
        with self._lock:
            for job in jobs:
                self._drop(job.pk)

    def abandon(self, job: Job) -> None:
        """Stop holding `job`, whose call runs on out of reach (stuck.py); never given back."""
        with self._lock:
            self._abandoned.add(job.pk)
            self._drop(job.pk)

    def _drop(self, pk: str) -> None:  # under the lock
        self._jobs.pop(pk, None)
        if self.alone == pk:
            self.alone = None

    def ids(self) -> set[str]:
        with self._lock:
            return set(self._jobs)

    def abandoned(self) -> set[str]:
        """Ids of the jobs abandon() stopped holding."""
        with self._lock:
            return set(self._abandoned)

    def kept(self, pending: Callable[[], set[str]]) -> set[str]:
        """Ids of the jobs never given back as not held: held, `pending()`, abandoned.

        Read on the main thread, which alone claims and stores the success batch. A job
        goes to the batch (`pending`) before it leaves the held jobs, so reading them in
        this order misses none; one finished and stored in between is no longer RUNNING.
        """
        held = self.ids()
        return held | pending() | self.abandoned()

    def all(self) -> list[Job]:
        with self._lock:
            return list(self._jobs.values())
