"""The warning, in DEBUG, for a job enqueued on a queue nothing names and no live worker serves.

Without DBJOBS_QUEUES any well-formed name is a queue: ``enqueue(..., queue="emials")``
succeeds, and its jobs wait for a worker that never comes, silently until a worker is
started with that name (or ``dbjobs_status`` is read). In development (``DEBUG``) the
first enqueue on such a queue says so, once per queue and database per process.
"""

from __future__ import annotations

import difflib
import logging
import warnings

from django.conf import settings as django_settings
from django.db import DatabaseError, transaction

from ..conf import settings
from ..exceptions import UnservedQueueWarning
from ..models import WorkerProcess
from ..registry import discovery
from ..registry.queue_names import declared

logger = logging.getLogger("django_dbjobs")

#: (database, queue) pairs already looked at.
_looked_at: set[tuple[str, str]] = set()


def warn_if_unserved(queue: str, using: str) -> None:
    """Warn once (a warning and a log line) if nothing names `queue` and no live worker serves it."""
    if (using, queue) in _looked_at or not django_settings.DEBUG or settings.QUEUES is not None:
        return
    known = declared()
    if queue not in known and not _served(queue, using):
        close = difflib.get_close_matches(queue, sorted(known), n=1, cutoff=0.6)
        message = (
            f"Queue {queue!r} is named by no registered job, schedule or setting, and no live worker "
            f"serves it: its jobs wait until a worker takes it (run_jobs --queues {queue}, or without "
            f"--queues).{f' Did you mean {close[0]!r}?' if close else ''} Set DBJOBS_QUEUES to make "
            "unknown queue names an error (this warning is given in DEBUG only, once per queue)."
        )
        logger.warning(message)
        filename, lineno, module = discovery.caller()
        warnings.warn_explicit(message, UnservedQueueWarning, filename, lineno, module=module)
    _looked_at.add((using, queue))


def _served(queue: str, using: str) -> bool:
    """Whether a live worker serves `queue`; True if the database cannot tell."""
    try:
        # A savepoint inside the caller's transaction: an error here must not break it.
        with transaction.atomic(using=using):
            workers = list(WorkerProcess.objects.using(using).live().values_list("queues", flat=True))
    except DatabaseError:
        return True
    return any(not queues or queue in queues for queues in workers)


def forget() -> None:
    """Look at every queue again (the settings changed)."""
    _looked_at.clear()


settings.on_reload(forget)
