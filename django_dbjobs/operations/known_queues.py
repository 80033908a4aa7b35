"""The queue names a project uses, and the worker's warning about a name it never uses.

Without DBJOBS_QUEUES any well-formed name is a queue, so ``run_jobs --queues
emails,emial`` starts happily and the jobs of the misspelled queue wait forever. A name
that no registered job, schedule or setting gives and no waiting, running or failed job
has is most likely a typo: the worker says so when it starts (run_jobs --processes, once),
with the closest known name.
"""

from __future__ import annotations

import difflib
import logging

from django.db import DatabaseError, InterfaceError

from ..conf import settings
from ..models import Job, JobStatus, Queue, Schedule
from ..registry.queue_names import declared

__all__ = ["declared", "unused", "warn_unused"]

logger = logging.getLogger("django_dbjobs")


def unused(queues: list[str], using: str = "default") -> list[str]:
    """The names among `queues` that nothing declares and no schedule, paused queue or job has.

    The tables are read only for names the code does not declare, so a worker started
    with its usual queues makes no query for this. Of the jobs, only the failed (their
    index begins with the queue), running (a few) and ready ones are read, never the
    finished successes, which may be millions.
    """
    known = declared()
    left = [name for name in queues if name not in known]
    jobs = Job.objects.using(using)
    for used in (
        lambda name: Schedule.objects.using(using).filter(queue=name).exists(),
        lambda name: Queue.objects.using(using).filter(name=name).exists(),
        lambda name: jobs.filter(status=JobStatus.FAILED, queue=name).exists(),
        lambda name: jobs.filter(status=JobStatus.RUNNING, queue=name).exists(),
        lambda name: jobs.filter(status=JobStatus.READY, queue=name).exists(),
    ):
        left = [name for name in left if not used(name)]
    return left


def warn_unused(queues: list[str], using: str = "default") -> None:
    """Log a warning for each queue in `queues` that looks like a typo (DBJOBS_QUEUES unset)."""
    if not queues or settings.QUEUES is not None:  # with DBJOBS_QUEUES, run_jobs refuses unknown names
        return
    try:
        names = unused(queues, using)
    except (DatabaseError, InterfaceError) as exc:  # the worker's own start will meet it, with its policy
        logger.debug("Could not look for unused queues: %s", exc)
        return
    known = sorted(declared() | (set(queues) - set(names)))
    for name in names:
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        logger.warning(
            "Queue %r is not used by any registered job, schedule or setting, and no job waiting, "
            "running or failed has it: jobs enqueued on a misspelled queue wait forever.%s Set "
            "DBJOBS_QUEUES to make unknown queue names an error.",
            name,
            f" Did you mean {close[0]!r}?" if close else "",
        )
