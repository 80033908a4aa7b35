"""The values a job's state columns take, and the claim order."""

from django.db import models
from django.db.models import Case, F, Value, When
from django.utils.translation import gettext_lazy as _

from ..conf import settings

MIN_PRIORITY = -100
MAX_PRIORITY = 100
#: The order workers claim in: higher priority first, then due time, then age.
CLAIM_ORDER = ("-priority", "run_at", "id")
#: How the last_error of a job handed back by a worker that did not know it begins
#: (operations/unknown_jobs.py); no exception's summary ("ClassName: ...") can begin so.
HANDED_BACK_PREFIX = "Handed back:"


class JobStatus(models.TextChoices):
    """A job's state; the values are those of django.tasks.TaskResultStatus."""

    READY = "READY", _("Ready")
    RUNNING = "RUNNING", _("Running")
    SUCCESSFUL = "SUCCESSFUL", _("Successful")
    FAILED = "FAILED", _("Failed")


class Blocked(models.TextChoices):
    """Why a READY job is left out of the claim (and of the claim index) for now.

    A job with a concurrency key waits as CONCURRENCY until the admission
    (flow/admission.py) gives it one of its key's slots: READY to Django, never claimed
    before then, and never read again by any claim while it waits. A job of a
    rate-limited queue (DBJOBS_QUEUE_LIMITS) is RATE: only the claims within the queue's
    rate take it (flow/rates.py), on an index of its own. A claimed job is NONE; a finished
    job with a key is DONE, so the jobs holding a key's slots are found without reading its
    history (MySQL's keyed-jobs index has no status column: see db/indexes.py). A job
    enqueued ``after=`` others, and a batch's callback, wait as AFTER until the transaction
    that stores the last of those outcomes releases them (models/settling.py).
    """

    NONE = "", _("No")
    CONCURRENCY = "CONCURRENCY", _("Waiting for a concurrency slot")
    RATE = "RATE", _("In a rate-limited queue: claimed within its rate")
    DONE = "DONE", _("Finished: holds no concurrency slot")
    AFTER = "AFTER", _("Waiting for other jobs to finish")


class Isolation(models.TextChoices):
    """Whether a job must run alone, so that a crash during its run can be pinned on it.

    A worker's successes and prefetched jobs are not written down one by one as they
    start (that would cost a write per job), so when a worker dies nobody knows which
    of its RUNNING jobs had started. They all go back uncharged, WAITING; a worker runs
    at most one WAITING job at a time, writes STARTED before calling it, and stores its
    outcome at once. A worker that dies then has at most one STARTED job: the one its
    death is charged to.
    """

    NONE = "", _("No")
    WAITING = "WAITING", _("Waiting to run alone")
    STARTED = "STARTED", _("Running alone")


def rated_queues() -> list[str]:
    """The rate-limited queues of DBJOBS_QUEUE_LIMITS, as this process's settings name them."""
    limits = settings.QUEUE_LIMITS
    if not isinstance(limits, dict):
        return []
    return sorted(
        q for q, limit in limits.items() if isinstance(limit, dict) and limit.get("rate") is not None
    )


def unblocked(queue: str) -> str:
    """The ``blocked`` value of a job of `queue` that nothing else holds back: RATE or NONE."""
    return Blocked.RATE if queue in rated_queues() else Blocked.NONE


def blocked_again():
    """The ``blocked`` value of a job going back to READY, as an expression of its row.

    A keyed job gives up its slot and waits for one again; a job of a rate-limited queue
    waits for the rate. Every write that makes a RUNNING (or FAILED) job READY again uses
    it, so a job waiting for a retry, or given back, holds no concurrency slot meanwhile.
    """
    rated = rated_queues()
    whens = [When(concurrency_key__isnull=False, then=Value(Blocked.CONCURRENCY))]
    if rated:
        whens.append(When(queue__in=rated, then=Value(Blocked.RATE)))
    return Case(*whens, default=Value(Blocked.NONE), output_field=models.CharField())


def done_if_keyed():
    """The ``blocked`` value of a job finishing: DONE for a keyed job, unchanged otherwise
    (a write that leaves it alone changes no index entry of an unkeyed job)."""
    return Case(
        When(concurrency_key__isnull=False, then=Value(Blocked.DONE)),
        default=F("blocked"),
        output_field=models.CharField(),
    )
